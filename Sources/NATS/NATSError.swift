internal import CNATS

// Design: every libnats call returns a `natsStatus`; `check` is the one place that turns a status other than
// `NATS_OK` into a `NATSError` (code + message + context), like `LMDB`'s checker. The message is the
// library's thread-local last error text when it has one (it says more than `natsStatus_GetText`, e.g.
// "no servers available for connection"), and JetStream calls also carry the server's `jsErrCode`
// (e.g. 10059 "stream not found") in `jetStreamCode`.

/// An error from libnats, from a NATS server or from the wrapper, with a stable code, a message and the
/// operation that failed.
public struct NATSError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The kind of failure; extensible without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Kind: Hashable, Sendable {
            case timeout, noServers, notFound, connectionClosed, connectionDisconnected, noResponders
            case invalidArgument, invalidSubject, ioError, protocolError, authFailed, notPermitted
            case illegalState, slowConsumer, maxPayload, noServerSupport, draining, staleConnection
            case jetStream, publishFailed, other(Int32)
        }
        fileprivate var kind: Kind

        /// The operation did not complete in time (`NATS_TIMEOUT`).
        public static let timeout = Code(kind: .timeout)
        /// No server could be reached (`NATS_NO_SERVER`): nothing listens, or every attempt failed.
        public static let noServers = Code(kind: .noServers)
        /// Something asked for does not exist (`NATS_NOT_FOUND`), e.g. a stream or a stored message.
        public static let notFound = Code(kind: .notFound)
        /// The connection is closed (`NATS_CONNECTION_CLOSED`).
        public static let connectionClosed = Code(kind: .connectionClosed)
        /// The connection is down and the operation cannot be buffered (`NATS_CONNECTION_DISCONNECTED`).
        public static let connectionDisconnected = Code(kind: .connectionDisconnected)
        /// A request found no subscriber on its subject (`NATS_NO_RESPONDERS`).
        public static let noResponders = Code(kind: .noResponders)
        /// An invalid argument (`NATS_INVALID_ARG`, `NATS_INVALID_TIMEOUT`, `NATS_INVALID_QUEUE_NAME`).
        public static let invalidArgument = Code(kind: .invalidArgument)
        /// An empty or malformed subject (`NATS_INVALID_SUBJECT`).
        public static let invalidSubject = Code(kind: .invalidSubject)
        /// Network I/O failed (`NATS_IO_ERROR`).
        public static let ioError = Code(kind: .ioError)
        /// The server sent something the client could not parse (`NATS_PROTOCOL_ERROR`).
        public static let protocolError = Code(kind: .protocolError)
        /// Authentication failed (`NATS_CONNECTION_AUTH_FAILED`).
        public static let authFailed = Code(kind: .authFailed)
        /// The server refused the action (`NATS_NOT_PERMITTED`).
        public static let notPermitted = Code(kind: .notPermitted)
        /// The object is in a state where the call makes no sense (`NATS_ILLEGAL_STATE`).
        public static let illegalState = Code(kind: .illegalState)
        /// A subscriber fell behind and messages were dropped (`NATS_SLOW_CONSUMER`).
        public static let slowConsumer = Code(kind: .slowConsumer)
        /// The payload exceeds the server's maximum (`NATS_MAX_PAYLOAD`).
        public static let maxPayload = Code(kind: .maxPayload)
        /// The server does not support the action (`NATS_NO_SERVER_SUPPORT`).
        public static let noServerSupport = Code(kind: .noServerSupport)
        /// The connection or subscription is draining (`NATS_DRAINING`).
        public static let draining = Code(kind: .draining)
        /// The server closed the connection as stale (`NATS_STALE_CONNECTION`).
        public static let staleConnection = Code(kind: .staleConnection)
        /// A JetStream API error other than the above (see `jetStreamCode`).
        public static let jetStream = Code(kind: .jetStream)
        /// One or more asynchronous JetStream publishes failed (reported by `waitForPublishes`).
        public static let publishFailed = Code(kind: .publishFailed)
        /// Any other `natsStatus`, by its raw value.
        public static func other(_ status: Int32) -> Code { Code(kind: .other(status)) }

        public var description: String {
            switch kind {
            case .timeout: "timeout"
            case .noServers: "noServers"
            case .notFound: "notFound"
            case .connectionClosed: "connectionClosed"
            case .connectionDisconnected: "connectionDisconnected"
            case .noResponders: "noResponders"
            case .invalidArgument: "invalidArgument"
            case .invalidSubject: "invalidSubject"
            case .ioError: "ioError"
            case .protocolError: "protocolError"
            case .authFailed: "authFailed"
            case .notPermitted: "notPermitted"
            case .illegalState: "illegalState"
            case .slowConsumer: "slowConsumer"
            case .maxPayload: "maxPayload"
            case .noServerSupport: "noServerSupport"
            case .draining: "draining"
            case .staleConnection: "staleConnection"
            case .jetStream: "jetStream"
            case .publishFailed: "publishFailed"
            case .other(let s): "other(\(s))"
            }
        }
    }

    /// What went wrong, as a code.
    public var code: Code
    /// Human-readable text (libnats' last error, the server's JetStream error, or the wrapper's own).
    public var message: String
    /// The wrapper operation that failed, e.g. `js_AddStream ORDERS`.
    public var context: String
    /// The JetStream API error code from the server (e.g. 10059 stream not found), when there was one.
    public var jetStreamCode: Int?

    /// Makes an error; `context` names the operation.
    public init(code: Code, message: String, context: String, jetStreamCode: Int? = nil) {
        self.code = code
        self.message = message
        self.context = context
        self.jetStreamCode = jetStreamCode
    }

    public var description: String {
        let js = jetStreamCode.map { " (JetStream error \($0))" } ?? ""
        return "NATS \(context): \(message)\(js) [\(code)]"
    }

    /// The error for a failed libnats call (`status` other than `NATS_OK`).
    static func from(_ status: natsStatus, _ context: String, jsCode: jsErrCode = jsErrCode(rawValue: 0)) -> NATSError
    {
        let kind: Code.Kind
        switch status {
        case NATS_TIMEOUT: kind = .timeout
        case NATS_NO_SERVER: kind = .noServers
        case NATS_NOT_FOUND: kind = .notFound
        case NATS_CONNECTION_CLOSED: kind = .connectionClosed
        case NATS_CONNECTION_DISCONNECTED: kind = .connectionDisconnected
        case NATS_NO_RESPONDERS: kind = .noResponders
        case NATS_INVALID_ARG, NATS_INVALID_TIMEOUT, NATS_INVALID_QUEUE_NAME: kind = .invalidArgument
        case NATS_INVALID_SUBJECT: kind = .invalidSubject
        case NATS_IO_ERROR: kind = .ioError
        case NATS_PROTOCOL_ERROR: kind = .protocolError
        case NATS_CONNECTION_AUTH_FAILED: kind = .authFailed
        case NATS_NOT_PERMITTED: kind = .notPermitted
        case NATS_ILLEGAL_STATE: kind = .illegalState
        case NATS_SLOW_CONSUMER: kind = .slowConsumer
        case NATS_MAX_PAYLOAD: kind = .maxPayload
        case NATS_NO_SERVER_SUPPORT: kind = .noServerSupport
        case NATS_DRAINING: kind = .draining
        case NATS_STALE_CONNECTION: kind = .staleConnection
        case NATS_ERR where jsCode.rawValue != 0: kind = .jetStream
        default: kind = .other(Int32(bitPattern: status.rawValue))
        }
        var last = NATS_OK
        var text = nats_GetLastError(&last).map { String(cString: $0) } ?? ""
        if last != status || text.isEmpty { text = String(cString: natsStatus_GetText(status)) }
        return NATSError(
            code: Code(kind: kind), message: text, context: context,
            jetStreamCode: jsCode.rawValue == 0 ? nil : Int(jsCode.rawValue))
    }
}

/// The one checker for every libnats status: `NATS_OK` passes, anything else throws a typed error.
@inline(__always)
func check(_ status: natsStatus, _ context: @autoclosure () -> String) throws {
    if status != NATS_OK { throw NATSError.from(status, context()) }
}

/// The checker for JetStream calls, which also report the server's JetStream error code.
@inline(__always)
func check(_ status: natsStatus, _ jsCode: jsErrCode, _ context: @autoclosure () -> String) throws {
    guard status != NATS_OK else { return }
    var error = NATSError.from(status, context(), jsCode: jsCode)
    // No one answers the JetStream API: the server runs without JetStream (an operator's trial got only
    // "No responders available for request (JetStream error 10076)").
    if status == NATS_NO_RESPONDERS {
        error.message = "no JetStream on this NATS server (no responder for its API): start nats-server with -js "
            + "(or `jetstream: enabled` in its configuration)"
    }
    throw error
}
