import LMDB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A failure of the store itself (not of an input line): the run stops with a non-zero status.
///
/// Shaped like swift-nio's `FileSystemError`: a stable `code` to match on, a `message` that says what went
/// wrong and what to do about it, the underlying `cause` (an `LMDBError`, an errno) and the store's `path`.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    /// The kind of failure; extensible without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case notAStore, truncated, corrupted, incompatibleFormat, brokenChain, writerBusy, commitFailed
            case noSpace, closed, configMismatch, invalidConfig, io, lmdb, other
        }
        private var kind: Kind
        private init(_ kind: Kind) { self.kind = kind }

        /// The directory holds data that is not a teamlog store (or a store whose creation never finished).
        public static let notAStore = Code(.notAStore)
        /// `data.mdb` is shorter than LMDB's own header says it is.
        public static let truncated = Code(.truncated)
        /// LMDB's header (meta pages) fails a consistency check.
        public static let corrupted = Code(.corrupted)
        /// A teamlog store of a format this build does not read.
        public static let incompatibleFormat = Code(.incompatibleFormat)
        /// The log's hash chain is broken: a writer refuses to append until `teamlog repair`.
        public static let brokenChain = Code(.brokenChain)
        /// Another process holds the writer lock.
        public static let writerBusy = Code(.writerBusy)
        /// A batch's write transaction failed; nothing of it is durable.
        public static let commitFailed = Code(.commitFailed)
        /// A batch's write transaction failed because the file system is full.
        public static let noSpace = Code(.noSpace)
        /// The store was closed (or failed before) and takes no more work.
        public static let closed = Code(.closed)
        /// Settings asked for differ from the ones the store was created with.
        public static let configMismatch = Code(.configMismatch)
        /// A setting out of range.
        public static let invalidConfig = Code(.invalidConfig)
        /// A system call failed (`cause` holds the errno).
        public static let io = Code(.io)
        /// LMDB failed (`cause` is the `LMDBError`).
        public static let lmdb = Code(.lmdb)
        /// Not classified further.
        public static let other = Code(.other)

        public var description: String {
            switch kind {
            case .notAStore: "notAStore"
            case .truncated: "truncated"
            case .corrupted: "corrupted"
            case .incompatibleFormat: "incompatibleFormat"
            case .brokenChain: "brokenChain"
            case .writerBusy: "writerBusy"
            case .commitFailed: "commitFailed"
            case .noSpace: "noSpace"
            case .closed: "closed"
            case .configMismatch: "configMismatch"
            case .invalidConfig: "invalidConfig"
            case .io: "io"
            case .lmdb: "lmdb"
            case .other: "other"
            }
        }
    }

    /// What went wrong, as a code.
    public var code: Code
    /// What went wrong and, where there is something to do, what to do.
    public var message: String
    /// The underlying error, if any.
    public var cause: (any Error)?
    /// The store directory (or file) concerned, if known.
    public var path: String?

    public init(code: Code, message: String, cause: (any Error)? = nil, path: String? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
        self.path = path
    }

    /// An unclassified failure (`code` is `.other`).
    public init(_ message: String) {
        self.init(code: .other, message: message)
    }

    /// A failed system call: `.io`, with the errno as the cause.
    static func system(_ message: String, call: String, path: String, errno code: Int32 = errno) -> StoreError {
        StoreError(code: .io, message: message, cause: SystemCallError(call, code), path: path)
    }

    /// The message, then the cause when there is one and the message does not already say it.
    public var description: String {
        guard let cause else { return message }
        if let lmdb = cause as? LMDBError, message.contains(lmdb.message) { return message }
        return "\(message) (\(cause))"
    }
}

/// A system call that failed, with its errno.
public struct SystemCallError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The call, e.g. `open`.
    public var call: String
    /// Its errno.
    public var errno: Int32

    public init(_ call: String, _ errno: Int32) {
        self.call = call
        self.errno = errno
    }

    public var description: String { "\(call): \(String(cString: strerror(errno))) (errno \(errno))" }
}
