"""The API's routes, one module a concern: the catalogue, a version's manifest and preamble, its
immutable bytes (shards, context and source objects), and the admin's alias writes. Each handler
finds the service's reader and config on ``request.app.state`` (:func:`sakura.serve.api.create_api`)."""

from sakura.serve.routes import admin, catalogue, manifests, objects

ROUTERS = (catalogue.router, manifests.router, objects.router, admin.router)

__all__ = ["ROUTERS"]
