/// The projection of one team: its information, modes, roster and pending requests.
///
/// A value with its fields in one copy-on-write box (`Storage`): every read of a team out of its
/// dictionary (`teams[id]`, in `decide` and in the checkpoint's encoding) copies the value, and a copy of
/// the unboxed struct retained and released each of its strings, arrays and dictionaries — 3–4% of the
/// writer's thread in batch and stream profiles. A copy now retains one object; a mutation copies the box
/// first when it is shared, so copies stay independent values.
public struct TeamState: Sendable, Equatable {
    /// Every field, in the box below.
    struct Fields: Sendable {
        var id: Id
        var kind: TeamKind
        var name = ""
        var intro = ""
        var announcement = ""
        var avatar = ""
        var ext = ""
        var joinMode = JoinMode.apply
        var inviteMode = InviteMode.manager
        var beInviteMode = BeInviteMode.noConsent
        var updateInfoMode = UpdateInfoMode.manager
        var muted = false
        var dismissed = false
        var owner: Id
        var createdSeq: UInt64
        var createdTs: Int64
        var slots: [Member?] = []
        var slotOf: [Id: Int32] = [:]
        /// `slotOf.count`, kept beside the other fields: a replay's plain broadcast reads only the count,
        /// and reading it off the dictionary's storage was a cache miss (2% of a 5M-event audit's
        /// applying thread, perf). Checked against the roster by `World.invariantViolations`.
        var memberCount = 0
        var bits = MemberBits()
        /// No free slot below word `freeHint` (a cache; not part of equality).
        var freeHint = 0
        var invites: [Id: [Id]] = [:]
        var applications: [Id: String] = [:]
        var stamp = ResidencyStamp()
        var past: [Id: [PastMembership]] = [:]
    }

    /// The box: mutated only through a uniquely referenced `TeamState` (`unique`).
    ///
    /// `value` is exempt from the run-time exclusivity checks Swift makes on class properties (a
    /// `swift_beginAccess` and `swift_endAccess` pair, ~130 instructions, on every read and write of a
    /// field: three per member a join adds, three per broadcast's roster count — callgrind of a replay).
    /// The static rules still hold for it, and no access can overlap another: the box is reached only
    /// through its one `TeamState` (written through `unique`, which copies a shared box first), and a
    /// `World` is used by one thread at a time.
    final class Storage: @unchecked Sendable {
        @exclusivity(unchecked) var value: Fields
        init(_ value: Fields) { self.value = value }
    }

    private var storage: Storage

    /// The box, copied first when another value shares it (call before every change).
    private var unique: Storage {
        mutating get {
            if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.value) }
            return storage
        }
    }

    public var id: Id {
        get { storage.value.id }
        set { unique.value.id = newValue }
    }
    public var kind: TeamKind {
        get { storage.value.kind }
        set { unique.value.kind = newValue }
    }
    public var name: String {
        get { storage.value.name }
        set { unique.value.name = newValue }
    }
    public var intro: String {
        get { storage.value.intro }
        set { unique.value.intro = newValue }
    }
    public var announcement: String {
        get { storage.value.announcement }
        set { unique.value.announcement = newValue }
    }
    public var avatar: String {
        get { storage.value.avatar }
        set { unique.value.avatar = newValue }
    }
    public var ext: String {
        get { storage.value.ext }
        set { unique.value.ext = newValue }
    }
    public var joinMode: JoinMode {
        get { storage.value.joinMode }
        set { unique.value.joinMode = newValue }
    }
    public var inviteMode: InviteMode {
        get { storage.value.inviteMode }
        set { unique.value.inviteMode = newValue }
    }
    public var beInviteMode: BeInviteMode {
        get { storage.value.beInviteMode }
        set { unique.value.beInviteMode = newValue }
    }
    public var updateInfoMode: UpdateInfoMode {
        get { storage.value.updateInfoMode }
        set { unique.value.updateInfoMode = newValue }
    }
    /// Team-wide mute: only owner and managers send.
    public var muted: Bool {
        get { storage.value.muted }
        set { unique.value.muted = newValue }
    }
    /// The team ended; every later op on it is `dismissed`. Its roster is the one it had then, read as
    /// ended at the dismissal (`teamlog team` shows none): a dismissal writes O(1) records.
    public var dismissed: Bool {
        get { storage.value.dismissed }
        set { unique.value.dismissed = newValue }
    }
    /// The owner (after dismissal: the last owner).
    public var owner: Id {
        get { storage.value.owner }
        set { unique.value.owner = newValue }
    }
    /// Seq and time of creation.
    public var createdSeq: UInt64 {
        get { storage.value.createdSeq }
        set { unique.value.createdSeq = newValue }
    }
    public var createdTs: Int64 {
        get { storage.value.createdTs }
        set { unique.value.createdTs = newValue }
    }

    /// Members by slot; `nil` marks a free slot.
    public var slots: [Member?] { storage.value.slots }
    /// Slot of each member.
    public var slotOf: [Id: Int32] { storage.value.slotOf }
    /// The fan-out core's view of the roster: presence, admins, notify states and online, per slot.
    /// `bits.present` also finds the lowest free slot without a scan of `slots`.
    public var bits: MemberBits { storage.value.bits }
    /// Pending invitations: invitee → inviters, in the order they invited.
    public var invites: [Id: [Id]] {
        get { storage.value.invites }
        _modify { yield &unique.value.invites }
    }
    /// Pending applications: applicant → message ("" when none).
    public var applications: [Id: String] {
        get { storage.value.applications }
        _modify { yield &unique.value.applications }
    }
    /// The store's residency stamp (`ResidencyStamp`: not state, equal in every value).
    public var stamp: ResidencyStamp {
        get { storage.value.stamp }
        _modify { yield &unique.value.stamp }
    }
    /// Ended memberships per user, oldest first (grows with leaves, never with messages).
    public var past: [Id: [PastMembership]] { storage.value.past }

    public init(id: Id, kind: TeamKind, owner: Id, seq: UInt64, ts: Int64) {
        storage = Storage(Fields(id: id, kind: kind, owner: owner, createdSeq: seq, createdTs: ts))
    }

    /// Number of members (of a dismissed team: at its dismissal; SPEC's views show 0).
    public var memberCount: Int { storage.value.memberCount }

    /// The member record of `user`, if a member.
    public func member(_ user: Id) -> Member? {
        let s = storage
        guard let slot = s.value.slotOf[user] else { return nil }
        return s.value.slots[Int(slot)]
    }

    /// Whether `user` is a member.
    public func isMember(_ user: Id) -> Bool { storage.value.slotOf[user] != nil }

    /// Members in roster order: by join seq, then slot (the order one op listed them in, owner first).
    public var roster: [Member] {
        storage.value.slots.compactMap { $0 }.sorted { ($0.joinSeq, $0.slot) < ($1.joinSeq, $1.slot) }
    }

    /// Member ids in roster order.
    public var memberIds: [Id] { roster.map(\.user) }

    /// Adds a member in the lowest free slot.
    @discardableResult
    public mutating func addMember(_ user: Id, role: Role, joinSeq: UInt64, online: Bool = false) -> Member {
        let slot = Int32(lowestFreeSlot())
        let s = unique
        // One hash of the user: the insertion tells whether they were a member (a lookup first, then the
        // insertion, hashed twice per member — a 2,000-member team.create's 4,000 probes of a growing table).
        let previous = s.value.slotOf.updateValue(slot, forKey: user)
        precondition(previous == nil, "\(user) is already a member of \(id)")
        if Int(slot) == s.value.slots.count { s.value.slots.append(nil) }
        let member = Member(user: user, role: role, joinSeq: joinSeq, slot: slot)
        s.value.slots[Int(slot)] = member
        s.value.memberCount += 1
        s.value.bits.refresh(Int(slot), member, online: online)
        return member
    }

    /// Makes room for `count` members in all (a team.create's roster, whose tables would otherwise double
    /// and rehash up to eleven times while a 2,000-member roster is added).
    public mutating func reserveMembers(_ count: Int) {
        let s = unique
        s.value.slotOf.reserveCapacity(count)
        s.value.slots.reserveCapacity(count)
        s.value.bits.reserve(words: (count + 63) / 64)
    }

    /// Restores a member record exactly as stored (used when loading projections).
    public mutating func restoreMember(_ member: Member, online: Bool = false) {
        let slot = Int(member.slot)
        let s = unique
        while s.value.slots.count <= slot { s.value.slots.append(nil) }
        precondition(s.value.slots[slot] == nil, "slot \(slot) of \(id) is taken")
        s.value.slots[slot] = member
        s.value.bits.refresh(slot, member, online: online)
        s.value.freeHint = 0
        if s.value.slotOf.updateValue(member.slot, forKey: member.user) == nil { s.value.memberCount += 1 }
    }

    /// Removes a member; returns the removed record.
    @discardableResult
    public mutating func removeMember(_ user: Id) -> Member? {
        guard let slot = storage.value.slotOf[user] else { return nil }  // absent: the box is not copied
        let s = unique
        s.value.slotOf.removeValue(forKey: user)
        s.value.memberCount -= 1
        let member = s.value.slots[Int(slot)]
        s.value.slots[Int(slot)] = nil
        s.value.bits.refresh(Int(slot), nil, online: false)
        s.value.freeHint = min(s.value.freeHint, Int(slot) / 64)
        while let last = s.value.slots.last, last == nil { s.value.slots.removeLast() }
        s.value.bits.trim(words: (s.value.slots.count + 63) / 64)
        return member
    }

    /// Removes a member at `seq`, keeping the ended membership (join, leave, slot) in `past`.
    public mutating func removeMember(_ user: Id, at seq: UInt64) {
        guard let member = removeMember(user) else { return }
        unique.value.past[user, default: []].append(
            PastMembership(joinSeq: member.joinSeq, leaveSeq: seq, slot: member.slot))
    }

    /// Restores a user's ended memberships exactly as stored (used when loading projections).
    public mutating func restorePast(_ user: Id, _ memberships: [PastMembership]) {
        unique.value.past[user] = memberships
    }

    /// Whether `user` was a member when the event at `seq` was applied (`seq` not after the last event).
    public func wasMember(_ user: Id, at seq: UInt64) -> Bool {
        if let member = member(user), member.joinSeq < seq { return true }
        return storage.value.past[user]?.contains { $0.spans(seq) } ?? false
    }

    /// The members when the event at `seq` was applied, in slot order (the order of its fan-out).
    public func members(at seq: UInt64) -> [Id] {
        var found: [(slot: Int32, user: Id)] = []
        let s = storage
        for case let member? in s.value.slots where member.joinSeq < seq { found.append((member.slot, member.user)) }
        for (user, memberships) in s.value.past {
            for m in memberships where m.spans(seq) { found.append((m.slot, user)) }
        }
        return found.sorted { $0.slot < $1.slot }.map(\.user)
    }

    /// Changes a member record in place.
    public mutating func updateMember(_ user: Id, _ change: (inout Member) -> Void) {
        guard let slot = storage.value.slotOf[user] else { return }  // absent: the box is not copied
        let s = unique
        change(&s.value.slots[Int(slot)]!)
        s.value.bits.refresh(
            Int(slot), s.value.slots[Int(slot)], online: MemberBits.test(s.value.bits.online, Int(slot)))
    }

    /// Ends the team: `dismissed`, and no member counts as online (presence no longer updates a dismissed
    /// team's roster, which nothing fans out to again).
    public mutating func dismiss() {
        let s = unique
        s.value.dismissed = true
        for w in s.value.bits.online.indices { s.value.bits.online[w] = 0 }
    }

    /// Marks whether a member has an online device (the bit status messages read).
    public mutating func setOnline(_ user: Id, _ online: Bool) {
        guard let slot = storage.value.slotOf[user] else { return }
        let s = unique
        MemberBits.set(&s.value.bits.online, Int(slot), online)
    }

    /// The lowest slot no member holds (deterministic: a function of the roster alone).
    private mutating func lowestFreeSlot() -> Int {
        let s = unique
        var w = s.value.freeHint
        let present = s.value.bits.present
        while w < present.count, present[w] == ~0 { w += 1 }
        s.value.freeHint = w
        if w == present.count { return w * 64 }
        return w * 64 + (~present[w]).trailingZeroBitCount
    }

    /// Equal information, roster (with slots), pending requests and ended memberships; caches are ignored.
    public static func == (a: TeamState, b: TeamState) -> Bool {
        if a.storage === b.storage { return true }
        return a.id == b.id && a.kind == b.kind && a.name == b.name && a.intro == b.intro
            && a.announcement == b.announcement && a.avatar == b.avatar && a.ext == b.ext
            && a.joinMode == b.joinMode && a.inviteMode == b.inviteMode && a.beInviteMode == b.beInviteMode
            && a.updateInfoMode == b.updateInfoMode && a.muted == b.muted && a.dismissed == b.dismissed
            && a.owner == b.owner && a.createdSeq == b.createdSeq && a.createdTs == b.createdTs
            && a.slots == b.slots && a.invites == b.invites && a.applications == b.applications && a.past == b.past
    }

    /// Owner and managers, in roster order: found through the admin bits (a few of up to 200,000 members),
    /// not by sorting the whole roster (a `team.apply` to a 2,000-member team did that for its notices).
    public var admins: [Id] {
        var found: [Member] = []
        let s = storage
        MemberBits.forEachSlot(s.value.bits.admins) { found.append(s.value.slots[$0]!) }
        return found.sorted { ($0.joinSeq, $0.slot) < ($1.joinSeq, $1.slot) }.map(\.user)
    }
}
