/// The working set: `World` holds the *resident* part of the projections, and the store makes sure that
/// everything an op's decision and application read is resident before it decides (docs/store-design.md).
///
/// Teams (with their rosters, pending requests and ended memberships), conversations, user
/// conversations, messages and receipt tallies are loaded on first touch and evicted when clean;
/// presence, signaling channels and offline queues stay resident (they grow with users and calls, not
/// with messages). What is resident never changes an answer: an absent entry of a resident-able table
/// means "does not exist" only after the store looked it up (`footprint`), and the derived indexes
/// (user → teams, online bits) cover exactly the resident rosters.

/// One unit the store loads and evicts as a whole, or (`receiptRead`) one lookup within a unit.
public enum ResidentKey: Hashable, Sendable {
    /// A team record with its members, pending invitations and applications, and ended memberships.
    case team(Id)
    /// A conversation's shared record and its counted-broadcast total.
    case conv(ConvKey)
    /// One user's view of one conversation, with their own and directed totals.
    case userConv(Id, ConvKey)
    /// A stored message or tip (or the id of an unstored one).
    case message(Id)
    /// A receipt tally's counts (its readers are looked up one by one).
    case receipt(Id)
    /// Whether one user sent a receipt for one message (part of the tally's unit).
    case receiptRead(Id, Id)
}

extension World {
    /// Appends to `keys` every unit that deciding and applying `op` read or create, as far as the resident
    /// state tells: a team's members are named only once its roster is resident, so the store loads the
    /// teams named first and asks again. Deterministic and pure; duplicates are allowed.
    ///
    /// `accepted`: the op is an event's, already decided, so the ids it makes are new — a sent message's
    /// (`duplicateMessageId` refused a used one) and its receipt tally, the tips' (`tip-SEQ`) — and they
    /// are left out: nothing stored can hold them. A replay that keeps no recency per unit uses it (an
    /// audit's: each left-out key was a hash probe and a Bloom filter's, both cache misses, per message).
    public func footprint(of op: Op, into keys: inout [ResidentKey], accepted: Bool = false) {
        let actor = op.actor
        switch op.body {
        case .teamCreate(let c):
            // Accepted, the team was new (`teamExists` refuses a used id, dismissed teams included: a team is
            // never deleted), so nothing stored can hold it, its conversation or any view of that: nothing to
            // look for. A replay after its first eviction probed each member's views, up to 2,000 per create.
            if accepted { return }
            keys.append(.team(c.team))
            let key = ConvKey(team: c.team, kind: c.kind)
            keys.append(.conv(key))
            keys.append(.userConv(actor, key))
            for user in c.members where user != actor { keys.append(.userConv(user, key)) }
            if !accepted { keys.append(.message(tipId(0))) }

        case .teamInvite(let id, let targets):
            teamFootprint(id, joining: targets, leaving: [], tips: tips(1, accepted), into: &keys)
        case .teamAcceptInvite(let id, _), .teamApply(let id, _):
            teamFootprint(id, joining: [actor], leaving: [], tips: tips(1, accepted), into: &keys)
        case .teamApproveApply(let id, let applicant):
            teamFootprint(id, joining: [applicant], leaving: [], tips: tips(1, accepted), into: &keys)
        case .teamKick(let id, let targets):
            teamFootprint(id, joining: [], leaving: targets, tips: tips(1, accepted), into: &keys)
        case .teamLeave(let id):
            teamFootprint(id, joining: [], leaving: [actor], tips: tips(1, accepted), into: &keys)
        case .teamDismiss(let id):  // the roster alone: no member's view changes (`World.apply`)
            teamFootprint(id, joining: [], leaving: [], tips: tips(1, accepted), into: &keys)
        case .teamTransferOwner(let id, _, let leaving):
            teamFootprint(
                id, joining: [], leaving: leaving ? [actor] : [], tips: tips(leaving ? 2 : 1, accepted), into: &keys)
        case .teamRejectInvite(let id, _), .teamRejectApply(let id, _), .memberSetNotify(let id, _):
            teamFootprint(id, joining: [], leaving: [], tips: 0, into: &keys)
        case .teamUpdate(let id, _), .teamMuteAll(let id, _), .teamAddManagers(let id, _),
            .teamRemoveManagers(let id, _), .teamMuteMember(let id, _, _, _):
            teamFootprint(id, joining: [], leaving: [], tips: tips(1, accepted), into: &keys)

        case .messageSend(let m):
            if !accepted { keys.append(.message(m.messageId)) }
            if m.to.kind == .p2p {
                let key = ConvKey(p2p: actor, m.to.id)
                keys.append(.conv(key))
                keys.append(.userConv(actor, key))
                keys.append(.userConv(m.to.id, key))
                return
            }
            keys.append(.team(m.to.id))
            let key = ConvKey(m.to, actor: actor)
            keys.append(.conv(key))
            keys.append(.userConv(actor, key))
            for user in m.directedUserIds ?? [] { keys.append(.userConv(user, key)) }
            if m.needReceipt && !accepted { keys.append(.receipt(m.messageId)) }

        case .messageRead(let to, _):
            if to.kind != .p2p { keys.append(.team(to.id)) }
            keys.append(.userConv(actor, ConvKey(to, actor: actor)))

        case .messageReceipt(let to, let ids):
            keys.append(.team(to.id))
            for id in ids {
                keys.append(.message(id))
                keys.append(.receipt(id))
                keys.append(.receiptRead(id, actor))
            }

        case .messageModify(let id, _):
            keys.append(.message(id))
            // Deciding it asks whether the message's team was dismissed: once the message is resident, its
            // team (a second round of the prefetch, `WorkingSet`); applying it does not.
            if !accepted, let message = messages[id], message.conv.kind != .p2p { keys.append(.team(message.conv.id)) }

        case .clientLogin, .clientLogout, .clockTick, .channelCreate, .channelJoin, .channelInvite,
            .channelCancelInvite, .channelReject, .channelAccept, .channelLeave, .channelClose, .channelControl,
            .membersSync:
            break  // presence, channels and offline queues are always resident
        }
    }

    /// A team op's units: the team; once its roster is resident, its conversation, the joining and
    /// leaving users' views of it, and the ids of the tips it may store.
    private func teamFootprint(_ id: Id, joining: [Id], leaving: [Id], tips: Int, into keys: inout [ResidentKey]) {
        keys.append(.team(id))
        guard let team = teams[id] else { return }
        let key = ConvKey(team: id, kind: team.kind)
        keys.append(.conv(key))
        for user in joining { keys.append(.userConv(user, key)) }
        for user in leaving { keys.append(.userConv(user, key)) }
        for index in 0..<tips { keys.append(.message(tipId(index))) }
    }

    /// The tips a footprint names: none for an accepted op (see `footprint(of:into:accepted:)`).
    private func tips(_ count: Int, _ accepted: Bool) -> Int { accepted ? 0 : count }

    /// The id of the `index`th tip the next event stores.
    private func tipId(_ index: Int) -> Id { Self.tipId(seq: lastSeq + 1, index: index) }

    /// The message id of the `index`th tip an event stores (`tip-SEQ`, then `tip-SEQ.1`).
    static func tipId(seq: UInt64, index: Int) -> Id {
        index == 0 ? "tip-\(seq)" : "tip-\(seq).\(index)"
    }

    /// Whether `key` is resident: its entry is here (and, for a reader, whether they sent a receipt is known).
    /// `mutating` only to look in place: reading a `Dictionary` value copies it — a whole team, roster and
    /// all (2.7% of an audit's applying thread), a user's conversations or a tally (a retain and a release
    /// each: 2.4% of a 5M-event audit's applying thread) — so each table is probed by index or through
    /// a `modify` access that changes nothing.
    @inline(__always)
    public mutating func isResident(_ key: ResidentKey) -> Bool {
        switch key {
        case .team(let id): teams.index(forKey: id) != nil
        case .conv(let key): convs.index(forKey: key) != nil
        case .userConv(let user, let conv):
            userConvs.withValue(forKey: user) { $0.modify(conv) { _ in () } != nil } ?? false
        case .message(let id): messages.containsKey(id)
        case .receipt(let id): receipts.containsKey(id)
        case .receiptRead(let id, let user): receipts.withValue(forKey: id) { $0.knowsReader(user) } ?? false
        }
    }

    /// Stamps a resident unit as named at `seq` (`ResidencyStamp`) and returns its previous stamp (0 when
    /// it became resident since it was last stamped); `nil` when it is not resident. One probe per table,
    /// the same as `isResident`. A reader (`receiptRead`) is part of its tally's unit and has no stamp.
    @inline(__always)
    public mutating func stamp(_ key: ResidentKey, seq: UInt64) -> UInt64? {
        // `index(forKey:)` then `values[index]`: one hash, and the value is changed where it lies (an
        // optional-chained `dict[key]?.stamp` moves the value out and back, copying a team).
        switch key {
        case .team(let id):
            guard let index = teams.index(forKey: id) else { return nil }
            return teams.values[index].stamp.mark(seq)
        case .conv(let key):
            guard let index = convs.index(forKey: key) else { return nil }
            return convs.values[index].stamp.mark(seq)
        case .userConv(let user, let key):
            return userConvs.withValue(forKey: user) { $0.modify(key) { $0.stamp.mark(seq) } } ?? nil
        case .message(let id):
            return messages.withValue(forKey: id) { $0.stamp.mark(seq) }
        case .receipt(let id):
            return receipts.withValue(forKey: id) { $0.stamp.mark(seq) }
        case .receiptRead: preconditionFailure("a reader has no stamp of its own")
        }
    }

    /// A resident unit's stamp; `nil` when it is not resident (a reader: `nil`).
    public func stamp(of key: ResidentKey) -> UInt64? {
        switch key {
        case .team(let id): teams[id]?.stamp.seq
        case .conv(let key): convs[key]?.stamp.seq
        case .userConv(let user, let key): userConvs[user]?[key]?.stamp.seq
        case .message(let id): messages[id]?.stamp.seq
        case .receipt(let id): receipts[id]?.stamp.seq
        case .receiptRead: nil
        }
    }

    // MARK: Loading (the store, from its tables)

    /// Makes a team resident, roster and all, as stored: its online bits from presence, its members in
    /// the user → teams index.
    public mutating func adoptTeam(_ team: TeamState) {
        precondition(teams.index(forKey: team.id) == nil, "team \(team.id) is already resident")
        var team = team
        if !team.dismissed {  // a dismissed team's roster has no online members and is in no user's index
            for case let member? in team.slots where isOnline(member.user) { team.setOnline(member.user, true) }
            for case let member? in team.slots { derived.userTeams[member.user, default: []].insert(team.id) }
        }
        teams[team.id] = team
    }

    /// Makes a conversation resident.
    public mutating func adoptConv(_ key: ConvKey, _ conv: ConvState) {
        convs[key] = conv
    }

    /// Gives a resident view loaded without them its running totals (`UserConv.hasTotals`).
    public mutating func completeTotals(_ user: Id, _ key: ConvKey, own: UInt64, directed: UInt64) {
        userConvs.withValue(forKey: user) { views in
            views.modify(key) { uc in
                uc.ownTotal = own
                uc.directedTotal = directed
            }
        }
    }

    /// Whether `user`'s view of `key` is resident without its running totals.
    public mutating func lacksTotals(_ user: Id, _ key: ConvKey) -> Bool {
        userConvs.withValue(forKey: user) { $0.modify(key) { !$0.hasTotals } ?? false } ?? false
    }

    /// Makes a user conversation resident.
    public mutating func adoptUserConv(_ user: Id, _ key: ConvKey, _ uc: UserConv) {
        if userConvs[user, default: [:]].upsert(key, default: uc, { $0 = uc }) { userConvCount += 1 }
    }

    /// Makes a message resident.
    public mutating func adoptMessage(_ id: Id, _ message: StoredMessage) {
        messages[id] = message
    }

    /// Makes a receipt tally resident (no reader known yet unless it has none).
    public mutating func adoptReceipt(_ id: Id, _ tally: ReceiptState) {
        if let old = receipts[id] { residentReaders -= old.readers.count }
        residentReaders += tally.readers.count
        receipts[id] = tally
    }

    /// Records a reader of a resident tally found in the store; `false` when the ordinal is out of range
    /// or the reader is already known.
    public mutating func adoptReader(_ id: Id, _ user: Id, ordinal: UInt64) -> Bool {
        guard receipts[id]?.restoreRead(user, ordinal: ordinal) == true else { return false }
        residentReaders += 1
        return true
    }

    // MARK: Evicting (the store, for units whose changes are all in the stored projections)

    /// Drops a unit from the resident state (a lookup key drops nothing on its own) and returns its
    /// estimated size (`residentBytesEstimate(of:)` before the drop; 0 when it was not resident).
    @discardableResult
    public mutating func evict(_ key: ResidentKey) -> Int {
        switch key {
        case .team(let id):
            guard let team = teams.removeValue(forKey: id) else { return 0 }
            for case let member? in team.slots {
                derived.userTeams[member.user]?.remove(id)
                if derived.userTeams[member.user]?.isEmpty == true { derived.userTeams[member.user] = nil }
            }
            return EntryBytes.team + team.slots.count * EntryBytes.member
        case .conv(let key):
            return convs.removeValue(forKey: key) == nil ? 0 : EntryBytes.conv
        case .userConv(let user, let key):
            guard userConvs[user]?.removeValue(forKey: key) != nil else { return 0 }
            userConvCount -= 1
            if userConvs[user]?.isEmpty == true { userConvs[user] = nil }
            return EntryBytes.userConv
        case .message(let id):
            return messages.removeValue(forKey: id) == nil ? 0 : EntryBytes.message
        case .receipt(let id):
            guard let tally = receipts.removeValue(forKey: id) else { return 0 }
            residentReaders -= tally.readers.count
            return EntryBytes.receipt + tally.readers.count * EntryBytes.reader
        case .receiptRead:
            return 0
        }
    }

    /// Drops every resident message (a wholesale eviction: all of them are in the stored projections).
    public mutating func evictAllMessages() {
        messages.removeAll()
    }

    /// Drops every resident conversation, user conversation and receipt tally at once (a wholesale
    /// eviction: all of them are in the stored projections), calling `evicted` with each unit dropped. The
    /// same as `evict` of each, without a probe per unit and without a list of them first (a 1M-event
    /// audit's wholesale eviction spent 216 of its 693 samples in `evict` and ~160 listing the units; at 5M
    /// events the list of ~1.3M units was ~30 MB of the audit's peak RSS).
    public mutating func evictAllConversations(_ evicted: (ResidentKey) -> Void) {
        for key in convs.keys { evicted(.conv(key)) }
        convs.removeAll()
        userConvs.removeAll { user, views in views.forEachKey { evicted(.userConv(user, $0)) } }
        userConvCount = 0
        receipts.removeAll { id, _ in evicted(.receipt(id)) }
        residentReaders = 0
    }

    /// Drops the resident messages `isClean` picks (the caller knows their records are in the stored
    /// projections), calling `evicted` with the id of each; how many it dropped.
    @discardableResult
    public mutating func evictMessages(
        inShards range: Range<Int> = 0..<ShardedDictionary<Id, StoredMessage>.shardCount,
        where isClean: (Id, inout StoredMessage) -> Bool, evicted: (Id) -> Void
    ) -> Int {
        let before = messages.count
        messages.removeAll(inShards: range, where: isClean, removed: evicted)
        return before - messages.count
    }

    /// Per-entry sizes of the estimate, in bytes: an entry with its dictionary overhead; a message with
    /// its content at an average size.
    private enum EntryBytes {
        static let team = 512, member = 112, conv = 112, userConv = 160, message = 320, receipt = 128, reader = 64
    }

    /// The estimated size of one resident unit (as counted by `residentBytesEstimate`).
    public func residentBytesEstimate(of key: ResidentKey) -> Int {
        switch key {
        case .team(let id): teams[id].map { EntryBytes.team + $0.slots.count * EntryBytes.member } ?? 0
        case .conv(let key): convs[key] == nil ? 0 : EntryBytes.conv
        case .userConv(let user, let key): userConvs[user]?[key] == nil ? 0 : EntryBytes.userConv
        case .message(let id): messages.containsKey(id) ? EntryBytes.message : 0
        case .receipt(let id): receipts[id].map { EntryBytes.receipt + $0.readers.count * EntryBytes.reader } ?? 0
        case .receiptRead: 0
        }
    }

    /// Whether a resident message asked for receipts; `nil` when it is not resident. `mutating` only to
    /// read in place.
    public mutating func residentMessageNeedsReceipt(_ id: Id) -> Bool? {
        messages.withValue(forKey: id) { $0.needReceipt }
    }

    /// The resident messages' share of `residentBytesEstimate` (without its walk over the teams).
    public var residentMessageBytesEstimate: Int { messages.count * EntryBytes.message }

    /// A rough size of the resident units in bytes (what `--cache-mb` bounds): per-entry estimates of
    /// each table's records with their dictionary overhead; message contents at an average size.
    public var residentBytesEstimate: Int {
        var members = 0
        for team in teams.values { members += team.slots.count }
        return teams.count * EntryBytes.team + members * EntryBytes.member + convs.count * EntryBytes.conv
            + userConvCount * EntryBytes.userConv + messages.count * EntryBytes.message
            + receipts.count * EntryBytes.receipt + residentReaders * EntryBytes.reader
    }
}

extension Op {
    /// Whether applying the op may number index entries from users' views' running totals (the `own` and
    /// `directed` entries of a counted message): a `message.send` only. A view loaded for any other op
    /// is loaded without them (`UserConv.hasTotals`): its record alone, not two index seeks more.
    public var numbersViews: Bool {
        if case .messageSend = body { true } else { false }
    }
}
