/// A named database inside an environment, typed by the codecs of its keys and values.
///
/// It is only a handle (LMDB's `MDB_dbi`): cheap to copy, valid for the life of its environment.
public struct Database<Key: LMDBCodec, Value: LMDBCodec>: Sendable {
    /// The untyped handle.
    public let handle: DatabaseHandle

    /// Wraps an opened handle with codecs.
    public init(_ handle: DatabaseHandle) {
        self.handle = handle
    }
}

/// An opened database, without codecs (LMDB's `MDB_dbi`).
public struct DatabaseHandle: Hashable, Sendable {
    let dbi: UInt32
    /// The name it was opened with.
    public let name: String
}
