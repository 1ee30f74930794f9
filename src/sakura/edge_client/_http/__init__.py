"""The phone's HTTP stack (internal to the edge client): a transport that downloads verified
bytes over kept-alive connections with bounded time and memory (:mod:`.transport`), one response
as it reads it (:mod:`.responses`), the connection pool and its watchdog (:mod:`.connections`),
per-request and per-edit deadlines (:mod:`.deadlines`), and which URLs it follows (:mod:`.urls`).
It uses the standard library's ``http.client`` only."""
