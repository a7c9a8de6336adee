public import Hummingbird
public import TeamLog

/// An error answered as JSON: `{"error":{"code":CODE,"message":TEXT,…}}` with its HTTP status. Codes are
/// the SPEC's rejection codes where one fits (`noSuchTeam`, `noSuchMessage`, `noSuchChannel`), else the
/// transport's own (`notFound`, `methodNotAllowed`, `payloadTooLarge`, `unauthorized`, `badRequest`,
/// `gone`, `notReady`, `stopping`, `storeFailed`, `internal`).
public struct APIError: Error, HTTPResponseError, Sendable {
    public var status: HTTPResponse.Status
    public var code: String
    public var message: String
    /// More fields of the error object (`oldestSeq` of a 410).
    public var extra: [(String, JSONValue)] = []
    public var headers: HTTPFields = [:]

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    /// The error object.
    public var json: JSONValue {
        .object([("error", .object([("code", .string(code)), ("message", .string(message))] + extra))])
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        response()
    }

    func response() -> Response {
        var headers = self.headers
        headers[.contentType] = "application/json"
        return Response(
            status: status, headers: headers, body: .init(byteBuffer: TeamLogServer.jsonLine(json)))
    }
}
