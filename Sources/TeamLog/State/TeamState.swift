/// The projection of one team: its information, modes, roster and pending requests.
///
/// A value with its fields in one copy-on-write box (`Storage`): every read of a team out of its
/// dictionary (`teams[id]`, in `decide` and in the checkpoint's encoding) copies the value, and a copy of
/// the unboxed struct retained and released each of its strings, arrays and dictionaries — 3–4% of the
/// writer's thread in batch and stream profiles. A copy now retains one object; a mutation copies the box
/// first when it is shared, so copies stay independent values.
public struct TeamState: Sendable, Equatable {
    @usableFromInline
    final class Storage: @unchecked Sendable {  // mutated only through a uniquely referenced `TeamState`
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
        var bits = MemberBits()
        var freeHint = 0
        var invites: [Id: [Id]] = [:]
        var applications: [Id: String] = [:]
        var stamp = ResidencyStamp()
        var past: [Id: [PastMembership]] = [:]

        init(id: Id, kind: TeamKind, owner: Id, createdSeq: UInt64, createdTs: Int64) {
            self.id = id
            self.kind = kind
            self.owner = owner
            self.createdSeq = createdSeq
            self.createdTs = createdTs
        }

        func copy() -> Storage {
            let c = Storage(id: id, kind: kind, owner: owner, createdSeq: createdSeq, createdTs: createdTs)
            c.name = name
            c.intro = intro
            c.announcement = announcement
            c.avatar = avatar
            c.ext = ext
            c.joinMode = joinMode
            c.inviteMode = inviteMode
            c.beInviteMode = beInviteMode
            c.updateInfoMode = updateInfoMode
            c.muted = muted
            c.dismissed = dismissed
            c.slots = slots
            c.slotOf = slotOf
            c.bits = bits
            c.freeHint = freeHint
            c.invites = invites
            c.applications = applications
            c.stamp = stamp
            c.past = past
            return c
        }
    }

    private var storage: Storage

    /// The box, copied first when another value shares it (call before every change).
    private var unique: Storage {
        mutating get {
            if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
            return storage
        }
    }

    public var id: Id {
        get { storage.id }
        set { unique.id = newValue }
    }
    public var kind: TeamKind {
        get { storage.kind }
        set { unique.kind = newValue }
    }
    public var name: String {
        get { storage.name }
        set { unique.name = newValue }
    }
    public var intro: String {
        get { storage.intro }
        set { unique.intro = newValue }
    }
    public var announcement: String {
        get { storage.announcement }
        set { unique.announcement = newValue }
    }
    public var avatar: String {
        get { storage.avatar }
        set { unique.avatar = newValue }
    }
    public var ext: String {
        get { storage.ext }
        set { unique.ext = newValue }
    }
    public var joinMode: JoinMode {
        get { storage.joinMode }
        set { unique.joinMode = newValue }
    }
    public var inviteMode: InviteMode {
        get { storage.inviteMode }
        set { unique.inviteMode = newValue }
    }
    public var beInviteMode: BeInviteMode {
        get { storage.beInviteMode }
        set { unique.beInviteMode = newValue }
    }
    public var updateInfoMode: UpdateInfoMode {
        get { storage.updateInfoMode }
        set { unique.updateInfoMode = newValue }
    }
    /// Team-wide mute: only owner and managers send.
    public var muted: Bool {
        get { storage.muted }
        set { unique.muted = newValue }
    }
    /// The team ended; every later op on it is `dismissed`.
    public var dismissed: Bool {
        get { storage.dismissed }
        set { unique.dismissed = newValue }
    }
    /// The owner (after dismissal: the last owner).
    public var owner: Id {
        get { storage.owner }
        set { unique.owner = newValue }
    }
    /// Seq and time of creation.
    public var createdSeq: UInt64 {
        get { storage.createdSeq }
        set { unique.createdSeq = newValue }
    }
    public var createdTs: Int64 {
        get { storage.createdTs }
        set { unique.createdTs = newValue }
    }

    /// Members by slot; `nil` marks a free slot.
    public var slots: [Member?] { storage.slots }
    /// Slot of each member.
    public var slotOf: [Id: Int32] { storage.slotOf }
    /// The fan-out core's view of the roster: presence, admins, notify states and online, per slot.
    /// `bits.present` also finds the lowest free slot without a scan of `slots`.
    public var bits: MemberBits { storage.bits }
    /// Pending invitations: invitee → inviters, in the order they invited.
    public var invites: [Id: [Id]] {
        get { storage.invites }
        _modify { yield &unique.invites }
    }
    /// Pending applications: applicant → message ("" when none).
    public var applications: [Id: String] {
        get { storage.applications }
        _modify { yield &unique.applications }
    }
    /// The store's residency stamp (`ResidencyStamp`: not state, equal in every value).
    public var stamp: ResidencyStamp {
        get { storage.stamp }
        _modify { yield &unique.stamp }
    }
    /// Ended memberships per user, oldest first (grows with leaves, never with messages).
    public var past: [Id: [PastMembership]] { storage.past }

    public init(id: Id, kind: TeamKind, owner: Id, seq: UInt64, ts: Int64) {
        storage = Storage(id: id, kind: kind, owner: owner, createdSeq: seq, createdTs: ts)
    }

    /// Number of members.
    public var memberCount: Int { storage.slotOf.count }

    /// The member record of `user`, if a member.
    public func member(_ user: Id) -> Member? {
        let s = storage
        guard let slot = s.slotOf[user] else { return nil }
        return s.slots[Int(slot)]
    }

    /// Whether `user` is a member.
    public func isMember(_ user: Id) -> Bool { storage.slotOf[user] != nil }

    /// Members in roster order: by join seq, then slot (the order one op listed them in, owner first).
    public var roster: [Member] {
        storage.slots.compactMap { $0 }.sorted { ($0.joinSeq, $0.slot) < ($1.joinSeq, $1.slot) }
    }

    /// Member ids in roster order.
    public var memberIds: [Id] { roster.map(\.user) }

    /// Adds a member in the lowest free slot.
    @discardableResult
    public mutating func addMember(_ user: Id, role: Role, joinSeq: UInt64, online: Bool = false) -> Member {
        precondition(storage.slotOf[user] == nil, "\(user) is already a member of \(id)")
        let slot = Int32(lowestFreeSlot())
        let s = unique
        if Int(slot) == s.slots.count { s.slots.append(nil) }
        let member = Member(user: user, role: role, joinSeq: joinSeq, slot: slot)
        s.slots[Int(slot)] = member
        s.slotOf[user] = slot
        s.bits.refresh(Int(slot), member, online: online)
        return member
    }

    /// Restores a member record exactly as stored (used when loading projections).
    public mutating func restoreMember(_ member: Member, online: Bool = false) {
        let slot = Int(member.slot)
        let s = unique
        while s.slots.count <= slot { s.slots.append(nil) }
        precondition(s.slots[slot] == nil, "slot \(slot) of \(id) is taken")
        s.slots[slot] = member
        s.bits.refresh(slot, member, online: online)
        s.freeHint = 0
        s.slotOf[member.user] = member.slot
    }

    /// Removes a member; returns the removed record.
    @discardableResult
    public mutating func removeMember(_ user: Id) -> Member? {
        guard storage.slotOf[user] != nil else { return nil }
        let s = unique
        guard let slot = s.slotOf.removeValue(forKey: user) else { return nil }
        let member = s.slots[Int(slot)]
        s.slots[Int(slot)] = nil
        s.bits.refresh(Int(slot), nil, online: false)
        s.freeHint = min(s.freeHint, Int(slot) / 64)
        while let last = s.slots.last, last == nil { s.slots.removeLast() }
        s.bits.trim(words: (s.slots.count + 63) / 64)
        return member
    }

    /// Removes a member at `seq`, keeping the ended membership (join, leave, slot) in `past`.
    public mutating func removeMember(_ user: Id, at seq: UInt64) {
        guard let member = removeMember(user) else { return }
        unique.past[user, default: []].append(PastMembership(joinSeq: member.joinSeq, leaveSeq: seq, slot: member.slot))
    }

    /// Restores a user's ended memberships exactly as stored (used when loading projections).
    public mutating func restorePast(_ user: Id, _ memberships: [PastMembership]) {
        unique.past[user] = memberships
    }

    /// Whether `user` was a member when the event at `seq` was applied (`seq` not after the last event).
    public func wasMember(_ user: Id, at seq: UInt64) -> Bool {
        if let member = member(user), member.joinSeq < seq { return true }
        return storage.past[user]?.contains { $0.spans(seq) } ?? false
    }

    /// The members when the event at `seq` was applied, in slot order (the order of its fan-out).
    public func members(at seq: UInt64) -> [Id] {
        var found: [(slot: Int32, user: Id)] = []
        let s = storage
        for case let member? in s.slots where member.joinSeq < seq { found.append((member.slot, member.user)) }
        for (user, memberships) in s.past {
            for m in memberships where m.spans(seq) { found.append((m.slot, user)) }
        }
        return found.sorted { $0.slot < $1.slot }.map(\.user)
    }

    /// Changes a member record in place.
    public mutating func updateMember(_ user: Id, _ change: (inout Member) -> Void) {
        guard storage.slotOf[user] != nil else { return }
        let s = unique
        guard let slot = s.slotOf[user] else { return }
        change(&s.slots[Int(slot)]!)
        s.bits.refresh(Int(slot), s.slots[Int(slot)], online: MemberBits.test(s.bits.online, Int(slot)))
    }

    /// Marks whether a member has an online device (the bit status messages read).
    public mutating func setOnline(_ user: Id, _ online: Bool) {
        guard let slot = storage.slotOf[user] else { return }
        let s = unique
        MemberBits.set(&s.bits.online, Int(slot), online)
    }

    /// The lowest slot no member holds (deterministic: a function of the roster alone).
    private mutating func lowestFreeSlot() -> Int {
        let s = unique
        var w = s.freeHint
        let present = s.bits.present
        while w < present.count, present[w] == ~0 { w += 1 }
        s.freeHint = w
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
        MemberBits.forEachSlot(s.bits.admins) { found.append(s.slots[$0]!) }
        return found.sorted { ($0.joinSeq, $0.slot) < ($1.joinSeq, $1.slot) }.map(\.user)
    }
}
