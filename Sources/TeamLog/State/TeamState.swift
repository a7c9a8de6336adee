/// The projection of one team: its information, modes, roster and pending requests.
public struct TeamState: Sendable, Equatable {
    public var id: Id
    public var kind: TeamKind
    public var name: String
    public var intro: String
    public var announcement: String
    public var avatar: String
    public var ext: String
    public var joinMode: JoinMode
    public var inviteMode: InviteMode
    public var beInviteMode: BeInviteMode
    public var updateInfoMode: UpdateInfoMode
    /// Team-wide mute: only owner and managers send.
    public var muted: Bool
    /// The team ended; every later op on it is `dismissed`.
    public var dismissed: Bool
    /// The owner (after dismissal: the last owner).
    public var owner: Id
    /// Seq and time of creation.
    public var createdSeq: UInt64
    public var createdTs: Int64

    /// Members by slot; `nil` marks a free slot.
    public private(set) var slots: [Member?] = []
    /// Slot of each member.
    public private(set) var slotOf: [Id: Int32] = [:]
    /// The fan-out core's view of the roster: presence, admins, notify states and online, per slot.
    /// `bits.present` also finds the lowest free slot without a scan of `slots`.
    public private(set) var bits = MemberBits()
    /// No free slot below word `freeHint` (a cache; not part of equality).
    private var freeHint: Int = 0
    /// Pending invitations: invitee → inviters, in the order they invited.
    public var invites: [Id: [Id]] = [:]
    /// Pending applications: applicant → message ("" when none).
    public var applications: [Id: String] = [:]
    /// The store's residency stamp (`ResidencyStamp`: not state, equal in every value).
    public var stamp = ResidencyStamp()
    /// Ended memberships per user, oldest first (grows with leaves, never with messages).
    public internal(set) var past: [Id: [PastMembership]] = [:]

    public init(id: Id, kind: TeamKind, owner: Id, seq: UInt64, ts: Int64) {
        self.id = id
        self.kind = kind
        self.name = ""
        self.intro = ""
        self.announcement = ""
        self.avatar = ""
        self.ext = ""
        self.joinMode = .apply
        self.inviteMode = .manager
        self.beInviteMode = .noConsent
        self.updateInfoMode = .manager
        self.muted = false
        self.dismissed = false
        self.owner = owner
        self.createdSeq = seq
        self.createdTs = ts
    }

    /// Number of members.
    public var memberCount: Int { slotOf.count }

    /// The member record of `user`, if a member.
    public func member(_ user: Id) -> Member? {
        guard let slot = slotOf[user] else { return nil }
        return slots[Int(slot)]
    }

    /// Whether `user` is a member.
    public func isMember(_ user: Id) -> Bool { slotOf[user] != nil }

    /// Members in roster order: by join seq, then slot (the order one op listed them in, owner first).
    public var roster: [Member] {
        slots.compactMap { $0 }.sorted { ($0.joinSeq, $0.slot) < ($1.joinSeq, $1.slot) }
    }

    /// Member ids in roster order.
    public var memberIds: [Id] { roster.map(\.user) }

    /// Adds a member in the lowest free slot.
    @discardableResult
    public mutating func addMember(_ user: Id, role: Role, joinSeq: UInt64, online: Bool = false) -> Member {
        precondition(slotOf[user] == nil, "\(user) is already a member of \(id)")
        let slot = Int32(lowestFreeSlot())
        if Int(slot) == slots.count { slots.append(nil) }
        let member = Member(user: user, role: role, joinSeq: joinSeq, slot: slot)
        slots[Int(slot)] = member
        slotOf[user] = slot
        bits.refresh(Int(slot), member, online: online)
        return member
    }

    /// Restores a member record exactly as stored (used when loading projections).
    public mutating func restoreMember(_ member: Member, online: Bool = false) {
        let slot = Int(member.slot)
        while slots.count <= slot { slots.append(nil) }
        precondition(slots[slot] == nil, "slot \(slot) of \(id) is taken")
        slots[slot] = member
        bits.refresh(slot, member, online: online)
        freeHint = 0
        slotOf[member.user] = member.slot
    }

    /// Removes a member; returns the removed record.
    @discardableResult
    public mutating func removeMember(_ user: Id) -> Member? {
        guard let slot = slotOf.removeValue(forKey: user) else { return nil }
        let member = slots[Int(slot)]
        slots[Int(slot)] = nil
        bits.refresh(Int(slot), nil, online: false)
        freeHint = min(freeHint, Int(slot) / 64)
        while let last = slots.last, last == nil { slots.removeLast() }
        bits.trim(words: (slots.count + 63) / 64)
        return member
    }

    /// Removes a member at `seq`, keeping the ended membership (join, leave, slot) in `past`.
    public mutating func removeMember(_ user: Id, at seq: UInt64) {
        guard let member = removeMember(user) else { return }
        past[user, default: []].append(PastMembership(joinSeq: member.joinSeq, leaveSeq: seq, slot: member.slot))
    }

    /// Restores a user's ended memberships exactly as stored (used when loading projections).
    public mutating func restorePast(_ user: Id, _ memberships: [PastMembership]) {
        past[user] = memberships
    }

    /// Whether `user` was a member when the event at `seq` was applied (`seq` not after the last event).
    public func wasMember(_ user: Id, at seq: UInt64) -> Bool {
        if let member = member(user), member.joinSeq < seq { return true }
        return past[user]?.contains { $0.spans(seq) } ?? false
    }

    /// The members when the event at `seq` was applied, in slot order (the order of its fan-out).
    public func members(at seq: UInt64) -> [Id] {
        var found: [(slot: Int32, user: Id)] = []
        for case let member? in slots where member.joinSeq < seq { found.append((member.slot, member.user)) }
        for (user, memberships) in past {
            for m in memberships where m.spans(seq) { found.append((m.slot, user)) }
        }
        return found.sorted { $0.slot < $1.slot }.map(\.user)
    }

    /// Changes a member record in place.
    public mutating func updateMember(_ user: Id, _ change: (inout Member) -> Void) {
        guard let slot = slotOf[user] else { return }
        change(&slots[Int(slot)]!)
        bits.refresh(Int(slot), slots[Int(slot)], online: MemberBits.test(bits.online, Int(slot)))
    }

    /// Marks whether a member has an online device (the bit status messages read).
    public mutating func setOnline(_ user: Id, _ online: Bool) {
        guard let slot = slotOf[user] else { return }
        MemberBits.set(&bits.online, Int(slot), online)
    }

    /// The lowest slot no member holds (deterministic: a function of the roster alone).
    private mutating func lowestFreeSlot() -> Int {
        var w = freeHint
        let present = bits.present
        while w < present.count, present[w] == ~0 { w += 1 }
        freeHint = w
        if w == present.count { return w * 64 }
        return w * 64 + (~present[w]).trailingZeroBitCount
    }

    /// Equal information, roster (with slots), pending requests and ended memberships; caches are ignored.
    public static func == (a: TeamState, b: TeamState) -> Bool {
        a.id == b.id && a.kind == b.kind && a.name == b.name && a.intro == b.intro
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
        MemberBits.forEachSlot(bits.admins) { found.append(slots[$0]!) }
        return found.sorted { ($0.joinSeq, $0.slot) < ($1.joinSeq, $1.slot) }.map(\.user)
    }
}
