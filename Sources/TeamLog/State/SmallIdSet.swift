/// A set of ids held as a plain array: for the many small sets of a per-user index (the teams a user is
/// in: a handful for most users), where a `Set` costs a hash table of at least twice the elements, a
/// storage header and a hash per insert. A heap profile of a 5M-event audit had the user → teams index at
/// 66 MB as `Set<Id>`s. Lookups scan; order is not kept (a removal moves the last element into the gap);
/// equality is set equality. A user in k teams pays O(k) per join or leave, as a login already does to
/// set its k online bits.
public struct SmallIdSet: Sendable, Sequence, ExpressibleByArrayLiteral, Equatable {
    private var ids: [Id] = []

    public init() {}

    public init(arrayLiteral elements: Id...) {
        for id in elements { insert(id) }
    }

    public var count: Int { ids.count }
    public var isEmpty: Bool { ids.isEmpty }

    public func contains(_ id: Id) -> Bool { ids.contains(id) }

    /// Adds `id` unless present; whether it was added. Grows by one element at a time (exact capacity):
    /// these sets stay small, and doubling would leave up to half of each one unused.
    @discardableResult
    public mutating func insert(_ id: Id) -> Bool {
        guard !ids.contains(id) else { return false }
        append(id)
        return true
    }

    /// Adds `id`, which the caller knows is absent (checked in debug builds only): no scan of the set.
    public mutating func insertNew(_ id: Id) {
        assert(!ids.contains(id), "\(id) is already in the set")
        append(id)
    }

    private mutating func append(_ id: Id) {
        ids.reserveCapacity(ids.count + 1)
        ids.append(id)
    }

    /// Removes `id` if present; whether it was.
    @discardableResult
    public mutating func remove(_ id: Id) -> Bool {
        guard let index = ids.firstIndex(of: id) else { return false }
        ids.swapAt(index, ids.count - 1)
        ids.removeLast()
        return true
    }

    public func makeIterator() -> IndexingIterator<[Id]> { ids.makeIterator() }

    public static func == (a: SmallIdSet, b: SmallIdSet) -> Bool {
        a.count == b.count && a.ids.allSatisfy { b.contains($0) }
    }
}
