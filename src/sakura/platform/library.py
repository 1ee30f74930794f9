"""A template library in an object store: versions, manifests, aliases, publishing, gc.

Every mutable object (a version's claim, gc's retirement mark, an alias) is a log of create-only
records (:mod:`~sakura.platform.record_log`): a move reads the newest record, decides, and writes
the next number with ``put_if_absent``, so of two movers that read the same record exactly one
moves; the other reads again and decides again. Nothing here needs a compare-and-swap.

Publishing protocol (crash-safe at every point). Each version number has a claim whose
``state`` moves building -> publishing -> published, or building -> abandoned.

1. claim the next number: write its claim's record 1 create-only (state ``building``). That
   record is never deleted, so no number is handed out twice; the build driver renews its
   claims' lease while it works;
2. write the level files (each to its tier) and the importance scores, all create-only;
3. move the claim to ``publishing``, then write ``manifest.json`` create-only: the version
   becomes visible, complete, at this instant;
4. move ``latest`` forward (:mod:`~sakura.platform.alias_log`), then move the claim to
   ``published``.

A crash before 3 leaves an invisible orphan. Once its lease is older than ``ORPHAN_GRACE_S``,
:meth:`TemplateLibrary.clean_orphans` moves the claim to ``abandoned`` and deletes the files.
The claim arbitrates: the owner's move to ``publishing`` and the cleaner's move to ``abandoned``
both write the record after the same ``building`` one, so exactly one is written, and a build
whose files were deleted can never publish (:class:`ClaimAbandoned`). A claim left in
``publishing`` with no manifest (a crash in the instant between the two writes) is never
cleaned: its owner might still write the manifest. A crash between 3 and 4 leaves a manifest
whose claim says ``publishing``: a rerun completes it (:meth:`TemplateLibrary.finish_publish`);
it never touches ``latest`` for a ``published`` claim, so an operator's rollback stands.

Retirement (the mark: retired <-> reinstated, retired -> deleting, which is final). gc marks an
old unaliased version ``retired``; once the mark is older than the grace period it moves the
mark to ``deleting``, re-reads every alias and deletes only if none points at the version. Every
alias move mirrors it: write the alias's next record, then read the mark; ``retired`` is moved to
``reinstated`` (the grace period restarts once the version is unaliased again) and ``deleting``
makes the mover undo its move (:func:`~sakura.platform.alias_log.settle`: a further record puts
the alias back on the newest earlier value not being deleted) and raise :class:`VersionRetired`.
Both sides write, then read the other's object: gc read the aliases after the mark became
``deleting``, which it never leaves, so an alias move that read missed happened later, and the
mover's read of the mark, later still, sees ``deleting``. A reinstatement and gc's move to
``deleting`` write the record after the same ``retired`` one, so only one is written; gc re-reads
aliases after marking, so a version pinned just before its mark was written is reinstated at
once. A version that gc finds aliased after its move to ``deleting`` (a move racing it, about to
be undone) is kept until no alias points at it. A mover killed before its undo leaves the alias
on such a version (kept whole while aliased, or, had gc read the aliases before the move, being
deleted); every gc run first settles such aliases, as the mover would have.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from sakura.platform import alias_log, layout, library_gc
from sakura.platform.errors import (  # the library's errors, importable from here as before
    AliasUnreadable,
    LibraryError,
    ModelChange,
    UnknownTemplate,
    VersionRetired,
)
from sakura.platform.ids import is_template_id
from sakura.platform.manifest import AliasDoc, LevelEntry, Manifest, ManifestError
from sakura.platform.store import NotFound, ObjectStore, open_store
from sakura.platform.version_state import (
    ABANDONED,
    BUILDING,
    CLAIM_ORDER,
    DELETING,
    PUBLISHED,
    PUBLISHING,
    Claim,
    ClaimAbandoned,
    mark_state,
    move_claim,
    read_claim,
    reinstate,
    take_claim,
    write_once,
)

LATEST = "latest"
#: A claim whose lease is older than this belongs to a dead build; drivers renew every CLAIM_RENEW_S.
ORPHAN_GRACE_S = 3600.0
CLAIM_RENEW_S = 600.0
#: How long gc keeps a version after it stops being aliased. Edits in flight on it take minutes
#: at most and servers cache aliases for seconds (``alias_ttl_s``): an hour is a wide margin.
RETIRE_GRACE_S = 3600.0
_MANIFEST = "manifest.json"
log = logging.getLogger("sakura.library")


def _held(data: bytes | None) -> bool:
    """Whether an alias record says an operator set it (read only after its version was)."""
    try:
        return data is not None and AliasDoc.from_bytes(data).held
    except ManifestError:
        return False


class TemplateLibrary:
    def __init__(self, store: ObjectStore, tiers: dict[str, ObjectStore] | None = None) -> None:
        self.store = store
        self.tiers = dict(tiers or {})
        self._tier_uris = {level: tier.uri for level, tier in self.tiers.items()}
        self._opened: dict[str, ObjectStore] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(cls, uri: str, tiers: dict[str, str] | None = None) -> TemplateLibrary:
        """The library at ``uri`` whose new versions keep the levels named in ``tiers`` on those stores."""
        library = cls(open_store(uri), {level: open_store(tier) for level, tier in (tiers or {}).items()})
        library._tier_uris.update(tiers or {})  # as given: an s3:// store's own uri drops its ?endpoint=
        return library

    def tier(self, level: str) -> ObjectStore:
        """Where a new version's ``level`` file is written."""
        return self.tiers.get(level, self.store)

    def tier_uri(self, level: str) -> str | None:
        """What a new version's manifest records as the store of its ``level`` file (None: the root)."""
        return self._tier_uris.get(level)

    def level_store(self, level: LevelEntry) -> ObjectStore:
        """Where a published version's level file is: the tier its manifest records, else the root.
        Serving, gc and evaluation all ask here."""
        return self._open(level.store) if level.store else self.store

    def _open(self, uri: str) -> ObjectStore:
        with self._lock:
            if uri not in self._opened:
                self._opened[uri] = open_store(uri)
            return self._opened[uri]

    # -- reading -------------------------------------------------------------------------
    def templates(self, *, unpublished: bool = False) -> list[str]:
        """Templates with a published version (``unpublished``: with any object at all)."""
        ids = set()
        for obj in self.store.list("templates/"):
            parts = obj.key.split("/")
            if len(parts) >= 3 and (unpublished or parts[-1] == _MANIFEST):
                ids.add(parts[1])
        return sorted(ids)

    def template_page(self, after: str | None = None, limit: int = 100) -> tuple[list[str], str | None]:
        """Up to ``limit`` template ids after ``after`` in catalogue order (the store's folder
        order), published or not; and the id the next page starts after (None: this was the last).
        One listing of at most ``limit + 1`` folders (and one more per as many a key cannot name),
        whatever the catalogue's size."""
        names = self.store.key_folders("templates/", after=after or "", limit=limit + 1)
        ids = [n for n in names[:limit] if is_template_id(n)]
        return ids, (names[limit - 1] if len(names) > limit else None)

    def template_ids(self) -> list[str]:
        """Every template id with a folder in the store, published or not: one folder listing per
        thousand templates, not a listing of every object (:meth:`templates`)."""
        ids: list[str] = []
        after: str | None = None
        while True:
            page, after = self.template_page(after, 1000)
            ids += page
            if after is None:
                return ids

    def versions(self, template_id: str) -> list[int]:
        """Published versions (those whose manifest exists), ascending."""
        return sorted(v for v, names in self._scan(template_id).items() if _MANIFEST in names)

    def aliases(self, template_id: str) -> dict[str, int]:
        out = {}
        for name, data in alias_log.heads(self.store, template_id).items():
            with contextlib.suppress(ManifestError):
                out[name] = AliasDoc.from_bytes(data).version
        return out

    def resolve(self, template_id: str, ref: int | str) -> int:
        """A numeric version, a version string, or an alias -> the version number."""
        number = layout.version_ref(ref)
        if number is not None:
            return number
        found = alias_log.head(self.store, template_id, str(ref))
        if found.data is None:
            if not self._has_versions(template_id):
                raise UnknownTemplate(template_id) from None
            raise LibraryError(f"template {template_id!r} has no alias {ref!r}") from None
        return AliasDoc.from_bytes(found.data).version

    def _has_versions(self, template_id: str) -> bool:
        """Whether ``template_id`` has a published version; False if the listing finds no root (a
        missing bucket: the caller's outage check says so)."""
        try:
            return bool(self.versions(template_id))
        except NotFound:
            return False

    def manifest(self, template_id: str, ref: int | str = LATEST) -> Manifest:
        version = self.resolve(template_id, ref)
        try:
            manifest = Manifest.from_bytes(self.store.get(layout.manifest_key(template_id, version)))
        except NotFound:
            raise LibraryError(f"template {template_id!r} has no version {version}") from None
        if manifest.template_id != template_id or manifest.version != version:
            raise ManifestError(f"manifest at {template_id} v{version} "
                                f"describes {manifest.template_id} v{manifest.version}")
        return manifest

    def find_by_hash(self, template_id: str, content_hash: str) -> int | None:
        for version in reversed(self.versions(template_id)):
            try:
                if self.manifest(template_id, version).content_hash == content_hash:
                    return version
            except (LibraryError, ManifestError):
                continue
        return None

    def _scan(self, template_id: str) -> dict[int, set[str]]:
        """Version -> names of the objects under it, in one listing."""
        found: dict[int, set[str]] = {}
        for obj in self.store.list(layout.versions_prefix(template_id)):
            parsed = layout.parse_version_key(obj.key)
            if parsed:
                found.setdefault(parsed[1], set()).add(parsed[2])
        return found

    # -- claims and publishing -----------------------------------------------------------
    def claim_version(self, template_id: str, content_hash: str, *, tiers: dict[str, str] | None = None) -> int:
        """Reserve the next version number (the claim's record 1, create-only and never deleted)."""
        version = max(self._scan(template_id), default=0) + 1
        while not take_claim(self.store, template_id, Claim(version, content_hash, time.time(),
                                                              tiers=dict(tiers or {}))):
            version += 1
        return version

    def renew_claim(self, template_id: str, version: int) -> bool:
        """Renew a building claim's lease; False once orphan cleanup has abandoned it."""
        claim = move_claim(self.store, template_id, version,
                           lambda c: replace(c, renewed_at=time.time()) if c.state == BUILDING else None)
        return claim.state != ABANDONED

    def abandon_claim(self, template_id: str, version: int) -> None:
        """Give up a building claim now (its builder died): the next :meth:`clean_orphans` deletes
        its files, and any a zombie builder writes later, and a publish of it fails."""
        move_claim(self.store, template_id, version,
                   lambda c: replace(c, state=ABANDONED) if c.state == BUILDING else None)

    def publish(self, manifest: Manifest, *, allow_model_change: bool = False, move_held: bool = False) -> int | None:
        """Make a claimed version visible (create-only manifest), then move ``latest`` forward,
        unless it serves a version built for another model and ``allow_model_change`` is not
        given (phones of that model would all fail), or an operator set it (held) and
        ``move_held`` is not given. The version ``latest`` names now."""
        template_id, version = manifest.template_id, manifest.version
        self._advance_claim(template_id, version, PUBLISHING)
        write_once(self.store, layout.manifest_key(template_id, version), manifest.to_bytes())
        return self._announce(template_id, version, allow_model_change, move_held)

    def finish_publish(self, template_id: str, version: int) -> bool:
        """Complete a publish interrupted between its manifest and ``latest``; True if it was."""
        claim = read_claim(self.store, template_id, version)
        published = self.store.head(layout.manifest_key(template_id, version)) is not None
        if claim is None or claim.state != PUBLISHING or not published:
            return False
        self._announce(template_id, version, allow_model_change=False, move_held=False)
        return True

    def _announce(self, template_id: str, version: int, allow_model_change: bool, move_held: bool) -> int | None:
        self.advance_alias(template_id, LATEST, version, allow_model_change=allow_model_change, move_held=move_held)
        self._advance_claim(template_id, version, PUBLISHED)
        return self._alias_target(template_id, LATEST)

    def model_of(self, template_id: str, version: int) -> tuple[str, str] | None:
        """(model name, fingerprint) a version was built for; None if its manifest cannot be read."""
        try:
            model = self.manifest(template_id, version).model
        except (LibraryError, ManifestError):
            return None
        return model.name, model.fingerprint

    def same_model(self, template_id: str, a: int | None, b: int) -> bool:
        """Whether phones that edit with version ``a`` can edit with ``b`` (unknown: assume so)."""
        if a is None or a == b:
            return True
        ours, theirs = self.model_of(template_id, a), self.model_of(template_id, b)
        return ours is None or theirs is None or ours == theirs

    def _alias_target(self, template_id: str, alias: str) -> int | None:
        try:
            return self.resolve(template_id, alias)
        except LibraryError:
            return None

    def _advance_claim(self, template_id: str, version: int, state: str) -> None:
        def change(claim: Claim) -> Claim | None:
            if claim.state == ABANDONED:
                raise ClaimAbandoned(f"{template_id} v{version}: orphan cleanup abandoned this build's claim "
                                     f"(its lease expired); rerun the build")
            current = CLAIM_ORDER.index(claim.state) if claim.state in CLAIM_ORDER else len(CLAIM_ORDER)
            return replace(claim, state=state) if current < CLAIM_ORDER.index(state) else None

        move_claim(self.store, template_id, version, change)

    # -- aliases -------------------------------------------------------------------------
    def advance_alias(self, template_id: str, alias: str, version: int, *,
                      allow_model_change: bool = False, move_held: bool = False) -> int | None:
        """Point ``alias`` at ``version`` unless it already points at a newer one, or at one built
        for another model and ``allow_model_change`` is not given, or an operator set it (held:
        a rollback stays rolled back) and ``move_held`` is not given. The number of the alias
        record written (None: the alias was left as it was)."""
        def should_move(current: int | None, held: bool) -> bool:
            return (current is None or current < version) and (move_held or not held) and (
                allow_model_change or self.same_model(template_id, current, version))

        return self._swap_alias(template_id, alias, version, should_move)

    def set_alias(self, template_id: str, alias: str, version: int, *, force: bool = False,
                  allow_model_change: bool = False) -> int | None:
        """Point ``alias`` at a published version (pin or roll back); the number of the alias record
        written (None: it pointed there already). ``latest`` set so is held: builds publish past it
        but leave it, unless told to move it. ``force`` moves on from a newest record that cannot
        be read (still create-only, after it), and logs it. Moving it onto a version built for
        another model is a :class:`ModelChange` unless ``allow_model_change``."""
        layout.validate_alias(alias)
        if self.store.head(layout.manifest_key(template_id, version)) is None:
            if not self._has_versions(template_id):
                raise UnknownTemplate(template_id)
            raise LibraryError(f"template {template_id!r} has no published version {version}")
        if mark_state(self.store, template_id, version) == DELETING:
            raise VersionRetired(f"template {template_id!r} version {version} is being deleted by gc")
        hold = alias == LATEST

        def should_move(current: int | None, held: bool) -> bool:
            if current == version and held == hold:
                return False
            if current and not allow_model_change and not self.same_model(template_id, current, version):
                theirs, ours = (self.model_of(template_id, v) or ("?", "") for v in (current, version))
                raise ModelChange(f"alias {alias!r} of {template_id!r} serves v{current} (model {theirs[0]}); "
                                  f"v{version} is built for model {ours[0]}: phones would need the other model. "
                                  "Allow it explicitly (--allow-model-change)")
            return True

        return self._swap_alias(template_id, alias, version, should_move, force=force, held=hold)

    def remove_alias(self, template_id: str, alias: str) -> int:
        """Take ``alias`` away (one more record: phones asking for it get a 404, and gc no longer
        keeps its version for it); the number of the record written. ``latest`` follows the
        builds and is not removable."""
        if layout.validate_alias(alias) == LATEST:
            raise LibraryError(f"alias {LATEST!r} follows the builds and cannot be removed; "
                               f"point it elsewhere with `sakura alias set {template_id} {LATEST} VERSION`")
        while True:
            found = alias_log.head(self.store, template_id, alias)
            if found.data is None:
                if not self._has_versions(template_id):
                    raise UnknownTemplate(template_id)
                raise LibraryError(f"template {template_id!r} has no alias {alias!r}")
            seq = alias_log.append(self.store, template_id, alias, found, None)
            if seq is not None:
                return seq

    def _swap_alias(self, template_id: str, alias: str, version: int,
                    should_move: Callable[[int | None, bool], bool], *, force: bool = False,
                    held: bool = False) -> int | None:
        """Read the alias's newest record, decide, and write the next one create-only
        (:mod:`~sakura.platform.alias_log`); another mover wrote it first: read and decide again."""
        while True:
            found = alias_log.head(self.store, template_id, alias)
            current = None if found.data is None else self._alias_version(template_id, alias, found.data, force)
            if current != 0 and not should_move(current, current is not None and _held(found.data)):
                return None
            seq = alias_log.append(self.store, template_id, alias, found, version, held=held)
            if seq is None:
                continue
            if current == 0:
                log.warning("alias %r of template %r was unreadable; overwritten by force with version %d",
                            alias, template_id, version)
            self._confirm_alias(template_id, alias, version)
            return seq

    @staticmethod
    def _alias_version(template_id: str, alias: str, data: bytes, force: bool) -> int:
        """The version an alias document names; 0 for an unreadable one that ``force`` overwrites."""
        try:
            return AliasDoc.from_bytes(data).version
        except ManifestError as exc:
            if force:
                return 0
            raise AliasUnreadable(f"alias {alias!r} of template {template_id!r} is unreadable ({exc}); overwrite it "
                                  f"explicitly with `sakura alias set {template_id} {alias} VERSION --force`") from None

    def _confirm_alias(self, template_id: str, alias: str, version: int) -> None:
        """After moving an alias onto ``version``: reinstate it if retired; undo the move if it is
        being deleted."""
        if reinstate(self.store, template_id, version) != DELETING:
            return
        alias_log.settle(self.store, template_id, alias)
        raise VersionRetired(f"template {template_id!r} version {version} is being deleted by gc; "
                             "the alias was not moved")

    # -- gc and orphans (sakura.platform.library_gc) ----------------------------------------
    def gc(self, template_id: str, keep: int, *, grace_s: float = RETIRE_GRACE_S) -> list[int]:
        """Delete published versions beyond the newest ``keep`` once no alias has pointed at them
        for ``grace_s`` (two phases, see the module docstring); the versions deleted now.
        Idempotent, and safe to run concurrently with itself, alias moves and builds."""
        return library_gc.gc(self, template_id, keep, grace_s)

    def gc_candidates(self, template_id: str, keep: int) -> list[int]:
        """The versions :meth:`gc` would retire now (deleted once ``grace_s`` has passed): changes nothing."""
        return library_gc.gc_candidates(self, template_id, keep)

    def retired(self, template_id: str) -> list[int]:
        """Published versions gc has retired: deleted by a gc run once no alias has pointed at them
        for its grace period, unless an alias takes one back first."""
        return library_gc.retired(self, template_id)

    def clean_orphans(self, template_id: str, *, grace_s: float = ORPHAN_GRACE_S,
                      levels: Iterable[str] = ()) -> list[int]:
        """Abandon unpublished claims whose lease is older than ``grace_s`` and delete their files
        (``levels``: level names whose tier stores to clean too, for claims that don't record
        them). Files a zombie worker writes later are swept by the next call."""
        return library_gc.clean_orphans(self, template_id, grace_s, levels)
