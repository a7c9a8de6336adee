import Hummingbird
import TeamLogThreads

/// Around every request: errors become JSON error objects (`APIError`, Hummingbird's own 404 and 413
/// included), and each request's duration is recorded by route, method and status. The duration is up
/// to the response head (a streamed body — the log export, the record stream — goes on after it).
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
        let route = context.endpointPath.map(Self.openAPIPath) ?? "unmatched"
        metrics.recordRequest(
            route: route, method: request.method.rawValue, status: response.status.code,
            seconds: Double(MonotonicClock.nanoseconds() - started) / 1e9)
        return response
    }

    /// `/v1/teams/:team` → `/v1/teams/{team}`.
    static func openAPIPath(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).map { part in
            part.hasPrefix(":") ? "{\(part.dropFirst())}" : String(part)
        }.joined(separator: "/")
    }
}
