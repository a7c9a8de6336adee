import HTTPTypes

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Hummingbird
import LMDB
public import Logging
import NIOCore
public import ServiceLifecycle
import Synchronization
import TeamLog
public import TeamLogRuntime
import TeamLogStore
import TeamLogThreads

/// `teamlog serve`'s HTTP transport (Hummingbird 2): it parses requests and prints answers; the
/// `WriterService` decides, commits and keeps the record window, the store answers queries.
///
/// Run it as a swift-service-lifecycle `Service`, after the writer's (`WriterLifecycle`) in the same
/// `ServiceGroup`: a graceful shutdown stops this one first (no new connection, in-flight requests
/// finished, record streams ended), then the writer (queued ops committed, a last checkpoint).
public final class TeamLogServer: Service, Sendable {
    public let writer: WriterService
    public let configuration: ServerConfiguration
    public let metrics: ServerMetrics
    let logger: Logger
    let auth: BearerAuth?
    private let bound = BoundPort()
    /// The `?at=` replays running (`ServerConfiguration.atReplays`).
    let atReplays: Slots
    /// Held while a `?at=` replay has `--at-base` copies open: an LMDB environment must not be open twice
    /// in one process (a second open takes the lock file's locks as its own and may reset its reader
    /// table), so replays from copies run one at a time whatever `atReplays` allows.
    let atBaseCopies = Monitor()

    public init(
        writer: WriterService, configuration: ServerConfiguration, metrics: ServerMetrics = ServerMetrics(),
        logger: Logger = Logger(label: "teamlog.serve")
    ) {
        self.writer = writer
        self.configuration = configuration
        self.metrics = metrics
        self.logger = logger
        auth = configuration.token.map(BearerAuth.init)
        atReplays = Slots(configuration.atReplays)
    }

    /// The port the server listens on, once it does (waits for it); `nil` if it stopped before binding.
    public func port() async -> Int? { await bound.value() }

    public func run() async throws {
        let shutdownLimit = configuration.shutdownTimeoutSeconds.map { TimeAmount.milliseconds(Int64($0 * 1_000)) }
        let bodyLimit = configuration.bodyLimit
        let app = Application(
            router: makeRouter(),
            server: .http1(
                configuration: .init(
                    // A graceful stop's close waits for the response bytes already written (`FlushBeforeClose`).
                    additionalChannelHandlers: [
                        FlushBeforeClose(limit: shutdownLimit), ExpectContinue(bodyLimit: bodyLimit),
                    ],
                    idleTimeout: configuration.idleTimeoutSeconds.map { .milliseconds(Int64($0 * 1_000)) })
            ),
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: "teamlog"),
            onServerRunning: { [bound] channel in bound.set(channel.localAddress?.port) },
            logger: logger)
        do {
            try await withGracefulShutdownHandler {
                try await app.run()
            } onGracefulShutdown: { [writer] in
                writer.window?.close()  // record streams end, so the server's own shutdown can finish
            }
        } catch let error as IOError where error.errnoCode == EADDRINUSE || error.errnoCode == EACCES {
            bound.set(nil)
            // NIO's own text ("bind(descriptor:ptr:bytes:): Address already in use) (errno: 98)") names a call.
            throw ListenError(
                "cannot listen on \(configuration.host):\(configuration.port): "
                    + (error.errnoCode == EADDRINUSE
                        ? "the address is in use (another server on that port?)"
                        : "permission denied (a port under 1024 needs privileges)"))
        } catch {
            bound.set(nil)
            throw error
        }
        bound.set(nil)
    }

    // MARK: - Routes

    func makeRouter() -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: ServerMiddleware(metrics: metrics))
        for route in Route.all {
            let method = HTTPRequest.Method(rawValue: route.method)!
            router.on(RouterPath(route.routerPath), method: method) { [self] request, context in
                try await respond(route, request, context)
            }
        }
        for route in Route.headable {
            router.on(RouterPath(route.routerPath), method: .head) { [self] request, context in
                let answer: Response
                do { answer = try await respond(route, request, context) } catch let error as APIError {
                    answer = error.response()  // its status and headers; the body goes below
                }
                // The GET's Content-Length (RFC 9110 §8.6: a HEAD's may only be the GET's; an empty body
                // left Hummingbird to say 0: a trial). Every HEAD route's GET body has a known length.
                var headers = answer.headers
                headers[.contentLength] = answer.body.contentLength.map(String.init)
                return Response(status: answer.status, headers: headers)
            }
        }
        // Other methods on a known path: 405 with the methods it has.
        let byPath = Dictionary(grouping: Route.all, by: \.path)
        for (path, routes) in byPath {
            let allowed = routes.map(\.method) + (Route.headable.contains { $0.path == path } ? ["HEAD"] : [])
            for method in ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "TRACE", "QUERY"] where !allowed.contains(method) {
                router.on(RouterPath(routes[0].routerPath), method: HTTPRequest.Method(rawValue: method)!) {
                    _, _ -> Response in
                    var error = APIError(.methodNotAllowed, "methodNotAllowed", "\(method) is not allowed on \(path)")
                    error.headers[.allow] = allowed.joined(separator: ", ")
                    throw error
                }
            }
        }
        return router
    }

    private func respond(_ route: Route, _ request: Request, _ context: BasicRequestContext) async throws -> Response {
        switch route {
        case .ops: return try await postOps(request)
        case .team: return try await query(.team, parameter("team", context), request)
        case .unread: return try await query(.unread, parameter("user", context), request)
        case .receipts: return try await query(.receipts, parameter("messageId", context), request)
        case .message: return try await query(.message, parameter("messageId", context), request)
        case .channel: return try await query(.channel, parameter("channel", context), request)
        case .log: return try await exportLog(request)
        case .records: return try recordStream(request)
        case .status:
            try authorize(request, write: false)
            let shared = Shared(try readyStore())
            let status = try await onThread { try shared.store.status() }
            return json(status.json)
        case .healthz:
            // Liveness: a store that failed while served (a commit that could not be written) refuses every
            // later write until the process restarts, so a supervisor's liveness probe should restart it.
            // Opening (`--wait`) and stopping are alive.
            if case .failed(let why) = writer.state {
                return json(
                    .object([("status", .string("failed")), ("message", .string(why))]), status: .serviceUnavailable)
            }
            return json(.object([("status", .string("ok"))]))
        case .readyz:
            let state = writer.state
            let ready = state == .ready
            var fields: [(String, JSONValue)] = [("ready", .bool(ready)), ("state", .string(Self.name(state)))]
            if case .failed(let why) = state { fields.append(("message", .string(why))) }
            // Still ready (writes and this server's queries go on), but other processes' queries stay at the
            // last checkpoint and the changes since wait in memory: said until a checkpoint succeeds.
            if let problem = writer.checkpointProblem { fields.append(("checkpointProblem", .string(problem))) }
            return json(.object(fields), status: ready ? .ok : .serviceUnavailable)
        case .metrics:
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            let (committed, checkpointed) = (writer.committedSeq, writer.checkpointSeq)
            let bytes = metrics.exposition(
                store: writer.store, atReplaysRunning: atReplays.inUse,
                checkpointLagNow: writer.state == .ready ? committed - min(committed, checkpointed) : nil,
                checkpointFailingNow: writer.checkpointProblem != nil, blocking: blockingWork.counts)
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
        case .openapi:
            var headers = HTTPFields()
            headers[.contentType] = "application/yaml"
            return Response(
                status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.yaml + "\n")))
        default:
            throw APIError(.notFound, "notFound", "no route \(route)")
        }
    }

    static func name(_ state: WriterService.State) -> String {
        switch state {
        case .opening: "opening"
        case .ready: "ready"
        case .failed: "failed"
        case .stopped: "stopped"
        }
    }

    // MARK: - Ops

    private func postOps(_ request: Request) async throws -> Response {
        try authorize(request, write: true)
        if let refusal = configuration.opsRefusal { throw APIError(.conflict, "partitioned", refusal) }
        let emitValue = request.uri.queryParameters.get("emit") ?? "all"
        guard let emit = Processor.Emit(rawValue: emitValue) else {
            throw APIError(.badRequest, "badRequest", "emit must be all, events or none")
        }
        _ = try readyStore()
        // Bodies the line parser would only turn into `badJSON` lines — while it decided the ops it could read
        // between them (a form upload's parts: an integrator's trial) — are refused before anything is read.
        if let encoding = request.headers[.contentEncoding], encoding.lowercased() != "identity" {
            throw APIError(
                .unsupportedMediaType, "unsupportedMediaType",
                "Content-Encoding \(encoding) is not accepted: send the JSON Lines uncompressed")
        }
        // A transfer coding but chunked (`gzip, chunked`): the framing is undone, the coding is not — the
        // parser decided the still-encoded bytes as lines (a trial: `badJSON`, or a plain chunk's op committed).
        let codings = request.headers[values: .transferEncoding].flatMap { $0.split(separator: ",") }
            .map { String($0).trimmingWhitespace.lowercased() }.filter { !$0.isEmpty }
        if let other = codings.first(where: { $0 != "chunked" }) {
            throw APIError(
                .notImplemented, "notImplemented",
                "Transfer-Encoding \(other) is not implemented: send the JSON Lines uncompressed (chunked or with a "
                    + "Content-Length)")
        }
        if let type = request.headers[.contentType], type.lowercased().hasPrefix("multipart/") {
            throw APIError(
                .unsupportedMediaType, "unsupportedMediaType",
                "a \(type.split(separator: ";").first ?? "multipart") body is a form upload: send the JSON Lines as the "
                    + "body itself (curl --data-binary @FILE, not -F)")
        }
        // Over the limit by its own word: refused now, not after reading up to the limit (a client that sent
        // `Expect: 100-continue` is told before it sends anything).
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > configuration.bodyLimit {
            throw APIError(
                .contentTooLarge, "payloadTooLarge",
                "the body (\(length) bytes) is over the \(configuration.bodyLimit)-byte limit")
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: configuration.bodyLimit)
        } catch let error as any HTTPResponseError where error.status == .contentTooLarge {
            throw APIError(
                .contentTooLarge, "payloadTooLarge", "the body is over the \(configuration.bodyLimit)-byte limit")
        } catch {
            // The client's framing (a malformed chunk size, a body shorter than its Content-Length): nothing
            // was queued, so nothing is decided; the client's error, not the server's.
            throw APIError(.badRequest, "badRequest", "the request body could not be read: \(error)")
        }
        var bytes = Array(body.readableBytesView)
        if let type = request.headers[.contentType], type.lowercased().hasPrefix("application/json") {
            Self.joinSingleObject(&bytes)
        }
        let lineCount = Self.lineCount(bytes)
        if lineCount > configuration.maxLines {
            throw APIError(
                .contentTooLarge, "tooManyLines",
                "the body holds \(lineCount) lines, over the \(configuration.maxLines)-line limit (--max-lines): nothing "
                    + "was decided; send them in smaller bodies")
        }
        let lines = ParsedLine.parseAll(bytes)
        let writer = self.writer
        let answer: WriterService.Answer = try await withCheckedThrowingContinuation { continuation in
            writer.submit(lines, emit: emit, maxOutputBytes: configuration.maxResponseBytes) { result in
                continuation.resume(with: result.mapError { Self.apiError($0) })
            }
        }
        // Encoded here, on this request's task, not on the writer's thread every request waits for.
        var headers = HTTPFields()
        headers[.contentType] = "application/x-ndjson"
        if answer.omittedOutputs > 0, let from = answer.omittedFromSeq {
            headers[Self.outputsOmitted] = String(answer.omittedOutputs)
            headers[Self.outputsOmittedFromSeq] = String(from)
        }
        return Response(
            status: .ok, headers: headers,
            body: .init(byteBuffer: ByteBuffer(bytes: WriterService.encode(answer.records))))
    }

    /// An `application/json` body that is one JSON object written over several lines (pretty-printed, as
    /// the OpenAPI document's `application/json: Op` allows) made one line: its line breaks are whitespace
    /// between tokens (JSON has none inside a string), so they become spaces. Before, each of its lines was
    /// a `badJSON` rejection. A body that is not one object (JSON Lines sent as `application/json`, which
    /// clients do) is left as it is.
    static func joinSingleObject(_ bytes: inout [UInt8]) {
        guard bytes.contains(0x0A), case .object? = try? JSONParser.parse(bytes) else { return }
        for i in bytes.indices where bytes[i] == 0x0A || bytes[i] == 0x0D { bytes[i] = 0x20 }
    }

    /// The lines of a body: its newlines, and one more for a last line without one.
    static func lineCount(_ bytes: [UInt8]) -> Int {
        var count = 0
        for byte in bytes where byte == 0x0A { count += 1 }
        if let last = bytes.last, last != 0x0A { count += 1 }
        return count
    }

    /// Output records a `POST /v1/ops` answer left out past `--max-response-mb`, and the seq from which
    /// `GET /v1/records?from=` has them.
    static let outputsOmitted = HTTPField.Name("Teamlog-Outputs-Omitted")!
    static let outputsOmittedFromSeq = HTTPField.Name("Teamlog-Outputs-Omitted-From-Seq")!

    static func apiError(_ failure: WriterService.Failure) -> APIError {
        switch failure.code {
        case .notReady: APIError(.serviceUnavailable, "notReady", failure.message)
        case .stopping: APIError(.serviceUnavailable, "stopping", failure.message)
        case .storeFailed: APIError(.internalServerError, "storeFailed", failure.message)
        }
    }

    // MARK: - Queries

    /// A SPEC §5 query: from the live projections, as of every op answered before the query arrived (the
    /// stored checkpoint with the records committed after it; no checkpoint is waited for); with
    /// `?at=SEQ` from a scratch store replayed to that seq, on a thread of its own.
    private func query(_ kind: QueryKind, _ id: String, _ request: Request) async throws -> Response {
        let missing = (code: kind.missingCode, message: kind.missingMessage(id))
        try authorize(request, write: false)
        let store = try readyStore()
        let answer: JSONValue?
        if let at = request.uri.queryParameters.get("at") {
            let seq = try Self.seq(at, name: "at")
            let config = writer.config
            let shared = Shared(store)
            let atBase = configuration.atBase
            guard configuration.atReplays > 0 else {
                // Off for good on this server: not a busy moment that `Retry-After` would see pass.
                throw APIError(
                    .forbidden, "atDisabled",
                    "point-in-time replays (?at=) are off on this server (--at-replays 0): ask one that serves them, "
                        + "or run `teamlog ... --at SEQ` beside it")
            }
            guard atReplays.take() else {
                var error = APIError(
                    .serviceUnavailable, "atBusy",
                    "\(configuration.atReplays) point-in-time replays (?at=) may run at once, and as many are running: "
                        + "try again later")
                error.headers[.retryAfter] = "5"
                throw error
            }
            defer { atReplays.give() }
            let copies = atBaseCopies
            let storePath = writer.path
            answer = try await onThread {
                let scratch: ScratchStore
                do {
                    scratch =
                        try atBase.flatMap { path in
                            try copies.locked {
                                try Self.replayedFromCopy(shared.store, at: seq, config: config, path, of: storePath)
                            }
                        } ?? shared.store.replayed(at: seq, config: config)
                } catch let error as Store.AsOfError {
                    throw APIError(.badRequest, "badRequest", error.description)
                }
                defer { scratch.remove() }
                return try scratch.store.readCommitted { try kind.view(scratch.store, Id(id), in: $0) }
            }
        } else {
            answer = try store.readCommitted { try kind.view(store, Id(id), in: $0) }
        }
        guard let answer else { throw APIError(.notFound, missing.code, missing.message) }
        return json(answer)
    }

    /// `store` as of `seq` replayed from the `--at-base` copy at `path` (or the newest in that directory)
    /// whose checkpoint is at or before `seq`, which is opened for it and closed after; `nil` when none is
    /// (the caller replays from seq 1). Thrown, as a 500 `atBase`: a path that is no longer a store nor a
    /// directory, a copy that cannot be opened or cannot serve (other settings, another log's).
    /// Callers hold `atBaseCopies`: LMDB environments must not be open twice in one process.
    static func replayedFromCopy(_ store: Store, at seq: UInt64, config: Config, _ path: String, of storePath: String)
        throws -> ScratchStore?
    {
        try withCopy(atOrBefore: seq, path, of: storePath) { base in
            try store.replayed(at: seq, config: config, base: base)
        }
    }

    /// `use` of the `--at-base` copy at `path` (or the newest in that directory) whose checkpoint is at or
    /// before `seq`, opened for it and closed after; `nil` when there is none. A copy that cannot be opened,
    /// or that `use` finds unable to serve (a `StoreError`), is a 500 `atBase` naming why. Callers hold
    /// `atBaseCopies`.
    static func withCopy<R>(atOrBefore seq: UInt64, _ path: String, of storePath: String, _ use: (Store) throws -> R)
        throws -> R?
    {
        let base: Store?
        do {
            // A damaged copy among the others is passed over (`serve` says which at its start).
            base = try Store.newestCopy(at: path, atOrBefore: seq, excluding: storePath).copy?.store
        } catch {
            throw APIError(.internalServerError, "atBase", "the --at-base copy \(path) cannot be opened: \(error)")
        }
        guard let base else { return nil }
        defer { base.close() }
        do { return try use(base) } catch let error as StoreError {
            throw APIError(.internalServerError, "atBase", "the --at-base copy \(path) cannot serve: \(error)")
        }
    }

    // MARK: - Log export

    /// `teamlog log` streamed: a thread walks the log (one snapshot) into a small queue of 256 KiB chunks
    /// that the response drains; a client that goes away closes the queue and stops the walk.
    private func exportLog(_ request: Request) async throws -> Response {
        try authorize(request, write: false)
        let shared = Shared(try readyStore())
        let params = request.uri.queryParameters
        func seq(_ name: String) throws -> UInt64? { try params.get(name).map { try Self.seq($0, name: name) } }
        let from = try seq("from") ?? 1
        let givenTo = try seq("to")
        if let givenTo, givenTo < from {
            throw APIError(.badRequest, "badRequest", "to (\(givenTo)) is before from (\(from))")
        }
        let to = givenTo ?? writer.committedSeq
        // From the raw query: `queryParameters` decodes `%XX` lossily (`%FF` would name the team "\u{FFFD}").
        let team = try Self.rawQueryValue(request.uri.query, "team").map {
            Id(try Self.id(percentDecodedBytes($0), name: "team"))
        }
        let queue = ChunkQueue<UInt8>(depth: 4)
        struct Stopped: Error {}
        guard
            startThread({
                do {
                    let problem = try shared.store.exportLog(from: from, to: to, team: team, chunkBytes: 256 << 10) {
                        _ in
                    } write: { chunk in
                        if !queue.push(chunk) { throw Stopped() }
                    }
                    queue.close(failure: problem.map { APIError(.internalServerError, "brokenChain", "\($0)") })
                } catch {
                    queue.close(failure: error)
                }
            }) != nil
        else { throw APIError(.internalServerError, "internal", "cannot start a thread") }
        var headers = HTTPFields()
        headers[.contentType] = "application/x-ndjson"
        return Response(
            status: .ok, headers: headers,
            body: .init { writer in
                do {
                    while let chunk = try await onThread({ try queue.pop() }) {
                        try await writer.write(ByteBuffer(bytes: chunk))
                    }
                    try await writer.finish(nil)
                } catch {
                    queue.close()
                    throw error
                }
            })
    }

    // MARK: - Record stream

    /// `GET /v1/records?from=SEQ` (or `Last-Event-ID: SEQ-1`, which wins): Server-Sent Events, one per committed event
    /// with records, `id:` its seq and one `data:` line per record (SPEC §4 JSON). Without `from`, the
    /// stream starts at the next event. A seq older than the retained window is caught up from the log
    /// (`catchUp`), or 410 with `oldestSeq` when that is off.
    private func recordStream(_ request: Request) throws -> Response {
        try authorize(request, write: false)
        let store = try readyStore()
        guard let window = writer.window else {
            throw APIError(.serviceUnavailable, "notReady", "the store is being opened")
        }
        var from = window.nextSeq
        // `Last-Event-ID` first: an EventSource reconnects to the same URL with the header added, so a stream
        // opened with `?from=X` would otherwise start at X again after every reconnect (each event pushed
        // again, and after `event: gone` the same catch-up over and over). `from` still must be a seq.
        let fromText = request.uri.queryParameters.get("from")
        if let fromText { from = try Self.seq(fromText, name: "from") }
        if let last = request.headers[HTTPField.Name("Last-Event-ID")!], let value = UInt64(last),
            value < UInt64(Int64.max)
        {
            from = value + 1  // a value that is not a seq is ignored, as a browser's EventSource may send any
        }
        let oldest = window.oldestSeq
        var catchUp: CatchUp?
        if from < oldest {
            // No replay slots at all (`--at-replays 0`) is no catch-up, as `--no-stream-catch-up` is.
            guard configuration.streamCatchUp && configuration.atReplays > 0 else {
                // An empty window (a restarted server) keeps nothing yet: its oldest is the next event's seq.
                let kept =
                    oldest >= window.nextSeq
                    ? "this server keeps no records before seq \(oldest), the next event's (it restarted since)"
                    : "the oldest record kept is at seq \(oldest)"
                var error = APIError(.gone, "gone", "seq \(from) is no longer retained: \(kept)")
                error.extra = [("oldestSeq", .int(Int64(oldest)))]
                throw error
            }
            catchUp = try startCatchUp(from: from, store: store, window: window)
        }
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-store"
        let heartbeat = configuration.streamHeartbeatSeconds
        return Response(
            status: .ok, headers: headers,
            body: .init { [from, catchUp] writer in
                var next = from
                var out = JSONWriter()
                // A comment at once: the response head goes out with it, so a subscriber of an idle store
                // knows it is connected (EventSource's `open`) without waiting for an event or a heartbeat.
                try await writer.write(ByteBuffer(string: ": connected\n\n"))
                if let catchUp {
                    do {
                        while let chunk = try await onThread({ try catchUp.queue.pop() }) {
                            try await writer.write(ByteBuffer(bytes: chunk))
                        }
                    } catch let error as APIError {
                        // The log could not be read back (a broken chain, a scratch store that failed): say
                        // so and end, as a subscriber that fell behind is told.
                        try await writer.write(ByteBuffer(string: "event: error\ndata: \(error.json.jsonString)\n\n"))
                        try await writer.finish(nil)
                        return
                    } catch {
                        catchUp.queue.close()  // the client went away: the catch-up's thread stops
                        throw error
                    }
                    next = catchUp.position.withLock { $0 } + 1
                }
                streaming: while true {
                    switch window.read(from: next, limit: 512) {
                    case .entries(let entries):
                        out.bytes.removeAll(keepingCapacity: true)
                        for entry in entries { Self.appendEvent(entry, to: &out) }
                        next = entries.last!.seq + 1
                        if !out.bytes.isEmpty { try await writer.write(ByteBuffer(bytes: out.bytes)) }
                    case .nothingYet:
                        let published = await Self.wait(window, for: next, seconds: heartbeat)
                        if !published { try await writer.write(ByteBuffer(string: ": keep-alive\n\n")) }
                    case .gone(let oldest):
                        // Fell behind the window while connected: say so and end; the client resumes (from the
                        // log, by catching up) or resyncs.
                        try await writer.write(ByteBuffer(string: "event: gone\ndata: {\"oldestSeq\":\(oldest)}\n\n"))
                        break streaming
                    case .closed:
                        break streaming
                    }
                }
                try await writer.finish(nil)
            })
    }

    /// A record stream's catch-up from the log: its thread's SSE bytes, and the last seq they cover once
    /// the queue has ended (the live window goes on from the next).
    final class CatchUp: Sendable {
        let queue = ChunkQueue<UInt8>(depth: 4)
        let position: Mutex<UInt64>
        init(from: UInt64) { position = Mutex(from - 1) }
    }

    /// Starts a thread that re-derives the records from `from` (`Store.recordReader`: a replay to
    /// `from - 1` — from the newest `--at-base` copy at or before it when there is one — then each event)
    /// and queues them as SSE events, advancing to the log's head again and again until the window holds
    /// the next seq. It holds one of the `atReplays` slots while it runs (503 `replayBusy` when none is
    /// free): a catch-up from far back costs what a `?at=` replay to there does.
    private func startCatchUp(from: UInt64, store: Store, window: RecordWindow) throws -> CatchUp {
        guard atReplays.take() else {
            var error = APIError(
                .serviceUnavailable, "replayBusy",
                "seq \(from) is older than the record window (which starts at seq \(window.oldestSeq)): a catch-up from "
                    + "the log needs one of the \(configuration.atReplays) replay slots (--at-replays), and none is free: "
                    + "try again later")
            error.headers[.retryAfter] = "5"
            throw error
        }
        let catchUp = CatchUp(from: from)
        let shared = Shared(store)
        let config = writer.config
        let atBase = configuration.atBase
        let storePath = writer.path
        let copies = atBaseCopies
        let slots = atReplays
        struct Stopped: Error {}
        let started = startThread(name: "catch-up") {
            var failure: (any Error)?
            var reader: RecordReader?
            var out = JSONWriter()
            do {
                do {
                    reader =
                        try atBase.flatMap { path in
                            try copies.locked {
                                try Self.recordReaderFromCopy(
                                    shared.store, from: from, config: config, path, of: storePath)
                            }
                        } ?? shared.store.recordReader(from: from, config: config)
                } catch let error as Store.AsOfError {
                    throw APIError(.internalServerError, "brokenChain", error.description)
                }
                func flush() throws {
                    guard !out.bytes.isEmpty else { return }
                    if !catchUp.queue.push(out.bytes) { throw Stopped() }
                    out = JSONWriter()
                }
                while let reader {
                    let reached = try reader.advance { seq, records in
                        if !records.isEmpty { Self.appendEvent(seq: seq, jsonLines: WriterService.encode(records), to: &out) }
                        if out.bytes.count >= 64 << 10 { try flush() }
                        return true
                    }
                    if !reached, let problem = reader.problem {
                        try flush()
                        throw APIError(.internalServerError, "brokenChain", "the log is broken at \(problem)")
                    }
                    catchUp.position.withLock { $0 = reader.position }
                    // The window holds the next seq (or will: it is past the head): the live stream goes on.
                    // The last bytes wait for the slot to be given back (below).
                    if window.oldestSeq <= reader.position + 1 { break }
                    try flush()
                }
            } catch is Stopped {
            } catch let error as APIError {
                failure = error
            } catch {
                failure = APIError(.internalServerError, "catchUp", "the catch-up failed: \(error)")
            }
            // The scratch store and the slot go before the client sees the catch-up's last event: a client
            // that asks for a replay or reconnects as soon as it has it finds the slot free.
            reader?.close()
            slots.give()
            if failure == nil && !out.bytes.isEmpty { _ = catchUp.queue.push(out.bytes) }
            catchUp.queue.close(failure: failure)
        }
        guard started != nil else {
            atReplays.give()
            throw APIError(.internalServerError, "internal", "cannot start a thread")
        }
        return catchUp
    }

    /// A `RecordReader` from `from` that starts from the `--at-base` copy at `path` (or the newest in that
    /// directory) at or before `from - 1`; `nil` when there is none (the caller replays from seq 1). As
    /// `replayedFromCopy`; callers hold `atBaseCopies`.
    static func recordReaderFromCopy(_ store: Store, from: UInt64, config: Config, _ path: String, of storePath: String)
        throws -> RecordReader?
    {
        guard from > 1 else { return nil }
        return try withCopy(atOrBefore: from - 1, path, of: storePath) { base in
            try store.recordReader(from: from, config: config, base: base)
        }
    }

    /// One SSE event: `id: SEQ`, a `data:` line per record (encoded by the first subscriber to read the
    /// entry, on its task; the others reuse the bytes). An event without records is skipped.
    static func appendEvent(_ entry: RecordWindow.Entry, to out: inout JSONWriter) {
        guard !entry.records.isEmpty else { return }
        appendEvent(seq: entry.seq, jsonLines: entry.jsonLines(), to: &out)
    }

    /// One SSE event of records already encoded as JSON Lines.
    static func appendEvent(seq: UInt64, jsonLines lines: [UInt8], to out: inout JSONWriter) {
        out.writeRaw("id: ")
        out.writeInt(Int64(seq))
        out.bytes.append(0x0A)
        var start = 0
        for (i, byte) in lines.enumerated() where byte == 0x0A {
            out.writeRaw("data: ")
            out.bytes += lines[start...i]
            start = i + 1
        }
        out.bytes.append(0x0A)
    }

    /// Waits for `seq` to be published or `seconds` to pass; true when something was published.
    static func wait(_ window: RecordWindow, for seq: UInt64, seconds: Double) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await window.wait(for: seq)
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    // MARK: - Helpers

    private func authorize(_ request: Request, write: Bool) throws {
        guard let auth, write || configuration.protectReads else { return }
        guard auth.allows(request.headers[.authorization]) else {
            var error = APIError(.unauthorized, "unauthorized", "this route needs Authorization: Bearer <token>")
            error.headers[.wwwAuthenticate] = "Bearer"
            throw error
        }
    }

    private func readyStore() throws -> Store {
        if let store = writer.store, writer.state == .ready { return store }
        switch writer.state {
        case .opening: throw APIError(.serviceUnavailable, "notReady", "the store is being opened")
        case .failed(let why): throw APIError(.serviceUnavailable, "storeFailed", why)
        case .ready, .stopped: throw APIError(.serviceUnavailable, "stopping", "the server is stopping")
        }
    }

    /// A path segment's id, its `%XX` escapes decoded: 400 `badId` for what no op could name (invalid UTF-8,
    /// a control character, empty, over 128 bytes), as a line naming it would be rejected.
    private func parameter(_ name: String, _ context: BasicRequestContext) throws -> String {
        guard let value = context.parameters.get(name) else {
            throw APIError(.badRequest, "badRequest", "missing \(name)")
        }
        return try Self.id(percentDecodedBytes(value), name: name)
    }

    /// `bytes` as an id, or 400 `badId` (SPEC: an id is non-empty UTF-8 of at most 128 bytes, no controls).
    static func id(_ bytes: [UInt8], name: String) throws -> String {
        guard let id = String(validating: bytes, as: UTF8.self) else {
            throw APIError(.badRequest, "badId", "\(name) is not valid UTF-8")
        }
        if let problem = Ids.problem(id) { throw APIError(.badRequest, "badId", "\(name) \(problem)") }
        return id
    }

    /// The still percent-encoded value of the first `name=` in a raw query string.
    static func rawQueryValue(_ query: String?, _ name: String) -> String? {
        guard let query else { return nil }
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts[0] == name { return parts.count > 1 ? String(parts[1]) : "" }
        }
        return nil
    }

    /// A seq given as text (`?at=`, `?from=`, `?to=`): 1 through 2^63 − 1 (as JSON carries it), else 400.
    static func seq(_ text: String, name: String) throws -> UInt64 {
        guard let value = UInt64(text), value > 0, value <= UInt64(Int64.max) else {
            throw APIError(.badRequest, "badRequest", "\(name) must be a seq (an integer from 1 to 2^63 - 1)")
        }
        return value
    }

    private func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: Self.jsonLine(value)))
    }

    /// A value as one line of compact JSON, written straight into the buffer (no `String` between: a
    /// 2,000-member team's answer is ~150 KB, and a `String` would be validated and copied twice).
    static func jsonLine(_ value: JSONValue) -> ByteBuffer {
        var writer = JSONWriter()
        writer.write(value)
        writer.bytes.append(0x0A)
        return ByteBuffer(bytes: writer.bytes)
    }
}

/// The store handed to another thread, for what is safe beside the writer's thread only: reads of the
/// stored projections and of the log, `status`, scratch replays (`Store` itself is not thread-safe).
struct Shared: @unchecked Sendable {
    let store: Store
    init(_ store: Store) { self.store = store }
}

/// The threads `onThread` runs blocking work on. At most 64 at once: `?at=` replays are fewer
/// (`--at-replays`), and a status read or a wait for an export's next chunk is brief, so the bound is
/// reached only by a flood of requests, which then queue here instead of each taking a thread.
let blockingWork = BlockingPool(name: "tl-blocking", maxThreads: 64)

/// Runs blocking work (a scratch replay, a status read, a queue pop) on a thread of `blockingWork`, off
/// Swift concurrency's few cooperative threads, and not on Dispatch's global queue, where on Linux a call
/// behind N blocked ones waits about N seconds (see `BlockingPool`).
func onThread<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
    try await blockingWork.run(body)
}

/// The bytes of a path segment with its `%XX` escapes decoded (ids may hold any character; not checked to
/// be UTF-8); a malformed escape stays as is.
func percentDecodedBytes(_ text: String) -> [UInt8] {
    let bytes = Array(text.utf8)
    guard bytes.contains(UInt8(ascii: "%")) else { return bytes }
    var out: [UInt8] = []
    var i = 0
    func hex(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: b - 0x30
        case 0x41...0x46: b - 0x41 + 10
        case 0x61...0x66: b - 0x61 + 10
        default: nil
        }
    }
    while i < bytes.count {
        if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.count, let h = hex(bytes[i + 1]), let l = hex(bytes[i + 2]) {
            out.append(h << 4 | l)
            i += 3
        } else {
            out.append(bytes[i])
            i += 1
        }
    }
    return out
}

/// A count of slots, taken without waiting (`take` says whether one was free) and given back.
final class Slots: @unchecked Sendable {
    private let monitor = Monitor()
    private let limit: Int
    private var taken = 0

    init(_ limit: Int) { self.limit = limit }

    func take() -> Bool {
        monitor.locked {
            guard taken < limit else { return false }
            taken += 1
            return true
        }
    }

    func give() { monitor.locked { taken -= 1 } }

    /// Slots taken now.
    var inUse: Int { monitor.locked { taken } }
}

/// The bound port, set once by `onServerRunning` (or `nil` when the server ended without binding).
final class BoundPort: @unchecked Sendable {
    private let monitor = Monitor()
    private var isSet = false
    private var port: Int?
    private var waiters: [CheckedContinuation<Int?, Never>] = []

    func set(_ port: Int?) {
        let woken: [CheckedContinuation<Int?, Never>] = monitor.locked {
            guard !isSet else { return [] }
            isSet = true
            self.port = port
            defer { waiters = [] }
            return waiters
        }
        for w in woken { w.resume(returning: port) }
    }

    func value() async -> Int? {
        await withCheckedContinuation { c in
            let now: Int?? = monitor.locked {
                if isSet { return .some(port) }
                waiters.append(c)
                return .none
            }
            if let now { c.resume(returning: now) }
        }
    }
}

/// The server could not bind its address.
public struct ListenError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
