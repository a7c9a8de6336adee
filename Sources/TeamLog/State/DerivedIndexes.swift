/// What `World` derives from its projected tables instead of storing: rebuilt after every restore and
/// load, maintained by `apply`, and checked against their sources by `World.derivedIndexViolations()`
/// (as swift-collections checks an `OrderedSet`'s hash table against its elements).
public struct DerivedIndexes: Sendable {
    /// The teams each user is a member of, over the resident rosters (login and logout set online bits
    /// through it).
    public internal(set) var userTeams: [Id: SmallIdSet] = [:]
    /// The open channels each user is a member of.
    public internal(set) var userChannels: [Id: Set<Id>] = [:]
    /// The earliest event time at which members sync removes someone (`nil`: nobody).
    public internal(set) var syncDeadline: Int64?
    /// Pending members-sync deadlines.
    var syncQueue = SyncQueue()

    public init() {}
}
