/// How `teamlog serve` listens and what it allows.
public struct ServerConfiguration: Sendable {
    /// Address to bind: loopback unless told otherwise.
    public var host = "127.0.0.1"
    /// Port to bind; 0 takes an ephemeral one (`TeamLogServer.port()` tells which).
    public var port = 8080
    /// The bearer token writes need (`--token-file`); `nil`: no authentication.
    public var token: String?
    /// With a token, require it for the `/v1/` reads too (health, readiness, metrics and the OpenAPI
    /// document stay open: they carry no data).
    public var protectReads = false
    /// Largest request body accepted (bytes); a larger one is answered 413.
    public var bodyLimit = 16 << 20
    /// Most lines a `POST /v1/ops` body may hold (`--max-lines`); more is answered 413 `tooManyLines`
    /// before anything is decided. What a request holds grows with its lines, not its bytes — each line is
    /// parsed and answered (a rejection record at least) before the answer is sent: a trial's 16 MB body of
    /// eight million one-byte lines held 2.68 GB (4.5 GB answering `emit=all`).
    public var maxLines = 100_000
    /// Bytes of output records (`Record.estimatedSize`) a `POST /v1/ops` answer keeps (`--max-response-mb`):
    /// outputs grow with the teams' sizes, not the body's (1,000 sends to a 20,000-member team answered 360
    /// MB, held in memory until sent). Past it the answer keeps every event, rejection and duplicate record,
    /// leaves the other outputs out and says so in `Teamlog-Outputs-Omitted` / `…-From-Seq`.
    public var maxResponseBytes = 256 << 20
    /// Seconds between keep-alive comments on an idle record stream.
    public var streamHeartbeatSeconds = 15.0
    /// Seconds a connection may send nothing — between requests, or in the middle of one (a request body
    /// that stops arriving) — before it is closed (`--idle-timeout-s`; `nil`: never). A response being
    /// sent (a record stream, a long export) is not idle. Without it a client that opened connections and
    /// never finished a body held them, and their tasks, for good.
    public var idleTimeoutSeconds: Double? = 60
    /// Seconds a stop waits for requests in flight, their responses' bytes included (`--shutdown-timeout-s`;
    /// `nil`: however long). `teamlog serve` gives its service group the same bound.
    public var shutdownTimeoutSeconds: Double? = 20

    /// Why `POST /v1/ops` is refused (409 `partitioned`), when ops come from elsewhere: a partition of a
    /// NATS deployment takes its ops from its stream only, so its log is the stream's order.
    public var opsRefusal: String?

    /// A copy of the store (`teamlog backup`), or a directory of copies, that `?at=SEQ` replays from: the
    /// newest whose checkpoint is at or before SEQ (`--at-base DIR`; only the log after it is replayed).
    /// Looked at for each such query, so a newer backup put there is used from the next query on; with no
    /// copy at or before SEQ the replay starts from seq 1; a path that cannot serve (gone, a copy of other
    /// settings or of another log) is a 500 `atBase` naming why.
    public var atBase: String?

    /// Point-in-time replays (`?at=SEQ`) that may run at once (`--at-replays N`; 0: none are served). One
    /// more is answered 503 `atBusy` with `Retry-After` rather than started: each holds a replay's working
    /// set (~0.8 GB at 5M events, `--cache-mb`'s replay budget) and a scratch store the size of the
    /// projections in `$TMPDIR`, so what the server may take is bounded by this, not by its callers.
    /// Replays from `atBase` copies run one at a time within it (`TeamLogServer.atBaseCopies`).
    public var atReplays = 1

    /// Whether a record stream asked for from a seq older than the window catches up from the log
    /// (`GET /v1/records`: the records re-derived by a replay, `Store.recordReader`, then the live window)
    /// rather than answering 410 `gone` (`--no-stream-catch-up`). A catch-up takes one of the `atReplays`
    /// slots while it replays and re-derives (503 `replayBusy` when none is free).
    public var streamCatchUp = true

    public init() {}
}
