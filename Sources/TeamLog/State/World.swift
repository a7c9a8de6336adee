/// The whole projected state: what replaying the log from seq 1 rebuilds.
///
/// Pure value: `decide` reads it, `apply` changes it, nothing here does I/O. Every change marks the
/// projection records it touched in `dirty`, so the store can write exactly those in the same transaction.
public struct World: Sendable {
    /// Limits and timings.
    public var config: Config
    /// Teams by id, dismissed ones included.
    public var teams: [String: TeamState] = [:]
    /// Seq of the last applied event (0 for an empty log).
    public var lastSeq: UInt64 = 0
    /// Time of the last applied event in ms.
    public var lastTs: Int64 = 0
    /// Records changed since the store last drained this set.
    public var dirty: Set<ProjectionKey> = []

    public init(config: Config = Config()) {
        self.config = config
    }

    /// Marks a record as changed.
    @inline(__always)
    mutating func touch(_ key: ProjectionKey) {
        dirty.insert(key)
    }
}
