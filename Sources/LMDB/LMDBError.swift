internal import CLMDB

/// An error from LMDB or from the wrapper, with a stable code, a message and the operation that failed.
///
/// `MDB_NOTFOUND` never becomes an error: lookups return `nil` instead.
public struct LMDBError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The kind of failure; extensible without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Kind: Hashable, Sendable {
            case mapFull, keyExists, readersFull, txnFull, cursorFull, pageFull, mapResized, incompatible
            case badReaderSlot, badTransaction, badValueSize, badDBI, corrupted, panic, versionMismatch
            case invalid, tlsFull, dbsFull, notFound, busy, system(Int32), unknown(Int32), decoding, truncated
        }
        fileprivate var kind: Kind

        /// The map is full; the environment grows it and retries inside `write`.
        public static let mapFull = Code(kind: .mapFull)
        /// A put with "no overwrite" or "append" met an existing or out-of-order key.
        public static let keyExists = Code(kind: .keyExists)
        /// Another process grew the map and this one has not adopted the new size.
        public static let mapResized = Code(kind: .mapResized)
        /// The reader lock table is full.
        public static let readersFull = Code(kind: .readersFull)
        /// The file or its pages are corrupted.
        public static let corrupted = Code(kind: .corrupted)
        /// The data file is shorter than its own header says (checked before the file is mapped).
        public static let truncated = Code(kind: .truncated)
        /// Not an LMDB data file.
        public static let invalid = Code(kind: .invalid)
        /// An LMDB data file of another data version.
        public static let versionMismatch = Code(kind: .versionMismatch)
        /// The environment hit a fatal error and must be reopened.
        public static let panic = Code(kind: .panic)
        /// The file was written by an incompatible LMDB version or is not an LMDB file.
        public static let incompatible = Code(kind: .incompatible)
        /// Another process holds the writer lock and the caller asked not to wait.
        public static let busy = Code(kind: .busy)
        /// A named database (or key) that does not exist was asked for where absence is an error.
        public static let notFound = Code(kind: .notFound)
        /// A stored value could not be decoded by its codec.
        public static let decoding = Code(kind: .decoding)
        /// An operating-system error (`errno`).
        public static func system(_ errno: Int32) -> Code { Code(kind: .system(errno)) }

        /// The `errno` of a `.system` code, else `nil`.
        public var systemErrno: Int32? {
            if case .system(let e) = kind { return e }
            return nil
        }

        public var description: String {
            switch kind {
            case .mapFull: "mapFull"
            case .keyExists: "keyExists"
            case .readersFull: "readersFull"
            case .txnFull: "txnFull"
            case .cursorFull: "cursorFull"
            case .pageFull: "pageFull"
            case .mapResized: "mapResized"
            case .incompatible: "incompatible"
            case .badReaderSlot: "badReaderSlot"
            case .badTransaction: "badTransaction"
            case .badValueSize: "badValueSize"
            case .badDBI: "badDBI"
            case .corrupted: "corrupted"
            case .panic: "panic"
            case .versionMismatch: "versionMismatch"
            case .invalid: "invalid"
            case .tlsFull: "tlsFull"
            case .dbsFull: "dbsFull"
            case .notFound: "notFound"
            case .busy: "busy"
            case .system(let e): "system(\(e))"
            case .unknown(let e): "unknown(\(e))"
            case .decoding: "decoding"
            case .truncated: "truncated"
            }
        }
    }

    /// What went wrong, as a code.
    public var code: Code
    /// Human-readable text (LMDB's `mdb_strerror` or the wrapper's own).
    public var message: String
    /// The wrapper operation that failed, e.g. `mdb_put`.
    public var context: String

    public init(code: Code, message: String, context: String) {
        self.code = code
        self.message = message
        self.context = context
    }

    public var description: String { "LMDB \(context): \(message) [\(code)]" }

    /// The raw return code when this error came from LMDB.
    static func from(_ rc: Int32, _ context: String) -> LMDBError {
        let kind: Code.Kind
        switch rc {
        case MDB_MAP_FULL: kind = .mapFull
        case MDB_KEYEXIST: kind = .keyExists
        case MDB_READERS_FULL: kind = .readersFull
        case MDB_TXN_FULL: kind = .txnFull
        case MDB_CURSOR_FULL: kind = .cursorFull
        case MDB_PAGE_FULL: kind = .pageFull
        case MDB_MAP_RESIZED: kind = .mapResized
        case MDB_INCOMPATIBLE, MDB_INVALID: kind = rc == MDB_INVALID ? .invalid : .incompatible
        case MDB_BAD_RSLOT: kind = .badReaderSlot
        case MDB_BAD_TXN: kind = .badTransaction
        case MDB_BAD_VALSIZE: kind = .badValueSize
        case MDB_BAD_DBI: kind = .badDBI
        case MDB_CORRUPTED, MDB_PAGE_NOTFOUND: kind = .corrupted
        case MDB_PANIC: kind = .panic
        case MDB_VERSION_MISMATCH: kind = .versionMismatch
        case MDB_TLS_FULL: kind = .tlsFull
        case MDB_DBS_FULL: kind = .dbsFull
        case MDB_NOTFOUND: kind = .notFound
        case let e where e > 0: kind = .system(e)
        default: kind = .unknown(rc)
        }
        let text = String(cString: mdb_strerror(rc))
        return LMDBError(code: Code(kind: kind), message: text, context: context)
    }
}

/// The one checker for every LMDB return code: success passes, anything else throws a typed error.
@inline(__always)
func check(_ rc: Int32, _ context: @autoclosure () -> String) throws {
    if rc != 0 { throw LMDBError.from(rc, context()) }
}
