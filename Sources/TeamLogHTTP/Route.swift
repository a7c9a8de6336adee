/// One route of the API, in the OpenAPI document's path syntax (`/v1/teams/{team}`). The server
/// registers exactly `Route.all`; a test checks the document against the same list.
public struct Route: Sendable, Hashable, CustomStringConvertible {
    public var method: String
    public var path: String

    public init(_ method: String, _ path: String) {
        self.method = method
        self.path = path
    }

    public var description: String { "\(method) \(path)" }

    /// The path in Hummingbird's syntax (`:team`).
    var routerPath: String {
        path.split(separator: "/", omittingEmptySubsequences: false).map { part in
            part.hasPrefix("{") && part.hasSuffix("}") ? ":" + part.dropFirst().dropLast() : String(part)
        }.joined(separator: "/")
    }

    public static let ops = Route("POST", "/v1/ops")
    public static let team = Route("GET", "/v1/teams/{team}")
    public static let unread = Route("GET", "/v1/users/{user}/unread")
    public static let receipts = Route("GET", "/v1/messages/{messageId}/receipts")
    public static let message = Route("GET", "/v1/messages/{messageId}")
    public static let channel = Route("GET", "/v1/channels/{channel}")
    public static let log = Route("GET", "/v1/log")
    public static let records = Route("GET", "/v1/records")
    public static let status = Route("GET", "/v1/status")
    public static let healthz = Route("GET", "/healthz")
    public static let readyz = Route("GET", "/readyz")
    public static let metrics = Route("GET", "/metrics")
    public static let openapi = Route("GET", "/openapi.yaml")

    /// The GET routes also answered to HEAD (RFC 9110 §9.3.2: the same status and headers, no body) — for
    /// probes and caches that use HEAD. Not the two streams (`log`, `records`), whose GET runs for as long
    /// as it streams.
    public static let headable: [Route] = [team, unread, receipts, message, channel, status, healthz, readyz, metrics, openapi]

    /// Every route the server answers.
    public static let all: [Route] = [
        ops, team, unread, receipts, message, channel, log, records, status, healthz, readyz, metrics, openapi,
    ]
}
