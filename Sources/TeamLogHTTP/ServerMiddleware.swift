import Hummingbird
import TeamLogThreads

/// Around every request: errors become JSON error objects (`APIError`, Hummingbird's own 404 and 413
/// included), and each request's duration is recorded by route, method and status: up to the last byte of
/// a streamed body (the log export, the record stream: recorded when the body ends, when the client goes
/// away, or when the response is dropped unwritten), up to the response for the others (their body is one
/// buffer, written at once).
struct ServerMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let started = MonotonicClock.nanoseconds()
        let response: Response
        do {
            response = try await next(request, context)
        } catch let error as APIError {
            response = error.response()
        } catch let error as any HTTPResponseError {
            let status = error.status
            let code =
                switch status.code {
                case 404: "notFound"
                case 405: "methodNotAllowed"
                case 413: "payloadTooLarge"
                case 400..<500: "badRequest"
                default: "internal"
                }
            response = APIError(status, code, status.reasonPhrase).response()
        } catch {
            response = APIError(.internalServerError, "internal", "\(error)").response()
        }
        // Hummingbird names its own 404 "NotFound": that is no route either.
        let route = context.endpointPath.flatMap { $0 == "NotFound" ? nil : Self.openAPIPath($0) } ?? "unmatched"
        let metrics = self.metrics
        let method = request.method.rawValue
        let status = response.status.code
        let record: @Sendable () -> Void = {
            metrics.recordRequest(
                route: route, method: method, status: status,
                seconds: Double(MonotonicClock.nanoseconds() - started) / 1e9)
        }
        guard response.body.contentLength == nil else {
            record()
            return response
        }
        var streamed = response
        let body = response.body
        // Recorded when the body ends, or — a body never written, its client gone before the head was
        // sent — when the response is let go.
        let once = RecordOnce(record)
        streamed.body = ResponseBody { writer in
            do {
                try await body.write(writer)
                once.fire()
            } catch {
                once.fire()
                throw error
            }
        }
        return streamed
    }

    /// `/v1/teams/:team` → `/v1/teams/{team}`.
    static func openAPIPath(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).map { part in
            part.hasPrefix(":") ? "{\(part.dropFirst())}" : String(part)
        }.joined(separator: "/")
    }
}

/// Runs an action once: at the first `fire()`, or when released without one.
final class RecordOnce: @unchecked Sendable {
    private let monitor = Monitor()
    private var action: (@Sendable () -> Void)?

    init(_ action: @escaping @Sendable () -> Void) { self.action = action }

    func fire() {
        let pending: (@Sendable () -> Void)? = monitor.locked {
            defer { action = nil }
            return action
        }
        pending?()
    }

    deinit { action?() }
}
