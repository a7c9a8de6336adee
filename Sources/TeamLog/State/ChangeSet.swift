/// The projection records changed since the store last took them: what the next checkpoint writes.
///
/// Separate from the projected state (`World`'s tables) as GRDB keeps its transaction observers apart from
/// `Database`: `apply` marks, the store drains, and equality of states never looks at it.
public struct ChangeSet: Sendable {
    /// Records changed in place (a set: a record changed a thousand times is written once).
    public internal(set) var dirty: Set<ProjectionKey> = []
    /// Records that need no set to deduplicate them: new append-only index records (each key is new), and
    /// the member and user-conversation records of a join or a leave, which a team.create or a dismiss
    /// makes by the thousand (hashing each into `dirty` was a tenth of the writer's work at creates, and a
    /// fifth of a 200,000-member dismiss). A key may also be in `dirty` or listed twice: the store encodes
    /// every listed key from the final state, so a repeat writes the same bytes (or deletes) again.
    public internal(set) var appended: [ProjectionKey] = []
    /// Whether changes are recorded at all. A replay that writes nothing turns this off: hashing every
    /// touched key was a tenth of a replay's cost.
    public var isTracking = true

    public init() {}

    /// Nothing changed.
    public var isEmpty: Bool { dirty.isEmpty && appended.isEmpty }

    /// How many keys are marked (a key both in `dirty` and `appended`, or listed twice, counts each time).
    public var count: Int { dirty.count + appended.count }

    /// Marks a record as changed.
    @inline(__always)
    mutating func touch(_ key: ProjectionKey) {
        guard isTracking else { return }
        switch key {
        case .counted, .own, .directed, .receiptRead: appended.append(key)
        default: dirty.insert(key)
        }
    }

    /// Marks a record of a join, or a record with a new key, as changed without hashing it.
    @inline(__always)
    mutating func touchAppended(_ key: ProjectionKey) {
        guard isTracking else { return }
        appended.append(key)
    }

    /// Forgets every change (after the store encoded them, or after a replay or restore).
    public mutating func removeAll() {
        dirty.removeAll(keepingCapacity: true)
        appended.removeAll(keepingCapacity: true)
    }

    /// Adds the changes of `later` (made after these).
    public mutating func append(_ later: ChangeSet) {
        dirty.formUnion(later.dirty)
        appended += later.appended
    }
}
