/// Messages (SPEC §1.2) and the fan-out of §2: deciding and applying `message.*` and `client.*`.
extension World {
    // MARK: Deciding

    func checkMessageOp(_ op: Op, ts: Int64) throws(Rejection) {
        let actor = op.actor
        switch op.body {
        case .messageSend(let m):
            if messages.containsKey(m.messageId) {
                throw Rejection(.duplicateMessageId, "message id \(m.messageId) was already used")
            }
            // Value rules of the input come after the reused-id check (the parser checks shapes only).
            try checkClientContent(m.content)
            if m.explicitIsCounted == true && !m.isPersisted {
                throw Rejection(
                    .badField, "field \"isCounted\" needs \"isPersisted\": an unstored message cannot count")
            }
            if m.explicitIsCounted == true && m.isStatusMessage {
                throw Rejection(.badField, "field \"isCounted\" cannot be true for a status message: it never counts")
            }
            if m.to.kind == .p2p {
                if m.to.id == actor { throw Rejection(.badField, "a p2p message needs a peer other than the sender") }
                if let d = m.directedUserIds, let stranger = d.first(where: { $0 != m.to.id && $0 != actor }) {
                    throw Rejection(.notMember, "\(stranger) is not in the p2p conversation")
                }
                return
            }
            try Self.checkSender(actor, of: m, at: ts, in: try conversationTeam(m.to))

        case .messageRead(let to, _):
            if to.kind == .p2p {
                if to.id == actor {
                    throw Rejection(.badField, "a p2p conversation needs a peer other than the reader")
                }
                return
            }
            // Reading is the reader's own position, not an op on the team: allowed on a dismissed team.
            let key = ConvKey(team: to.id, kind: try conversationTeam(to, allowDismissed: true).kind)
            if userConvs[actor]?[key] == nil {
                throw Rejection(.notMember, "\(actor) is not a member of \(to.id)")
            }

        case .messageReceipt(let to, let ids):
            if to.kind == .p2p {
                throw Rejection(.badField, "receipts are for team messages; \"to\" is a p2p conversation")
            }
            let team = try conversationTeam(to)
            let key = ConvKey(team: to.id, kind: team.kind)
            for id in ids {
                guard let message = messages[id], message.stored, message.conv == key else {
                    throw Rejection(.noSuchMessage, "no message \(id) in \(to.id)")
                }
                if message.isTip { throw Rejection(.notPermitted, "\(id) is a tip: tips take no receipts") }
                guard message.needReceipt, let tally = receipts[id] else {
                    throw Rejection(.notPermitted, "\(id) was sent without needReceipt")
                }
                if message.sender == actor {
                    throw Rejection(.notPermitted, "\(actor) sent \(id): senders send no receipt")
                }
                if !wasReceiver(actor, of: message, tally, in: team) {
                    throw Rejection(.notPermitted, "\(actor) did not receive \(id)")
                }
            }

        case .messageModify(let id, let content):
            try checkClientContent(content)
            guard let message = messages[id], message.stored else {
                throw Rejection(.noSuchMessage, "no stored message \(id)")
            }
            // SPEC §1.1: every op on a dismissed team is `dismissed` but a reader's `message.read`.
            if message.conv.kind != .p2p, teams[message.conv.id]?.dismissed == true {
                throw Rejection(.dismissed, "team \(message.conv.id) was dismissed")
            }
            if message.isTip { throw Rejection(.notPermitted, "\(id) is a tip: tips cannot be modified") }
            if message.sender != actor {
                throw Rejection(.notPermitted, "only the sender \(message.sender) may modify \(id)")
            }

        default:
            preconditionFailure("not a message op: \(op.name)")
        }
    }

    /// Whether `user` received a `needReceipt` team message: one of its directed receivers, or a member
    /// when it was sent (from the roster and its ended memberships), not its sender.
    func wasReceiver(_ user: Id, of message: StoredMessage, _ tally: ReceiptState, in team: borrowing TeamState)
        -> Bool
    {
        if let directed = tally.directedReceivers { return directed.contains(user) }
        return user != message.sender && team.wasMember(user, at: message.seq)
    }

    /// Content a client may send: `notification` and `tip` are the server's own (`notPermitted`), any
    /// other type must be one of `ContentType` (`badField`). The parser checked the shape (an object
    /// with a string `type`).
    func checkClientContent(_ content: JSONValue) throws(Rejection) {
        guard case .string(let type)? = content["type"] else { return }
        if type == "notification" || type == "tip" {
            throw Rejection(.notPermitted, "clients cannot send \(type) messages; the server generates them")
        }
        guard ContentType(rawValue: type) != nil else {
            let allowed = ContentType.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw Rejection(.badField, "field \"content.type\" is \"\(type)\"; expected one of \(allowed)")
        }
    }

    /// The sender rules of a team message (SPEC §1.2): a member, not muted, not in a muted team unless an
    /// admin, and every directed user a member.
    static func checkSender(_ actor: Id, of m: MessageSend, at ts: Int64, in team: borrowing TeamState)
        throws(Rejection)
    {
        guard let member = team.member(actor) else {
            throw Rejection(.notMember, "\(actor) is not a member of \(team.id)")
        }
        if member.isMuted(at: ts) {
            let until = member.mutedUntil == -1 ? "with no end" : "until \(member.mutedUntil!)"
            throw Rejection(.muted, "\(actor) is muted in \(team.id) \(until)")
        }
        if team.muted && !member.role.isAdmin {
            throw Rejection(.teamMuted, "\(team.id) is muted: only the owner and managers may send")
        }
        for user in m.directedUserIds ?? [] where !team.isMember(user) {
            throw Rejection(.notMember, "directed user \(user) is not a member of \(team.id)")
        }
    }

    /// The team a team conversation names: it exists, has that kind and is not dismissed (unless allowed).
    /// A copy (deciding does not mutate, and reading a `Dictionary` value without mutating copies it): one
    /// per check, so read it once.
    func conversationTeam(_ to: Conversation, allowDismissed: Bool = false) throws(Rejection) -> TeamState {
        guard let team = teams[to.id] else { throw Rejection(.noSuchTeam, "no team \(to.id)") }
        let kind: Conversation.Kind = team.kind == .team ? .team : .superTeam
        if kind != to.kind {
            throw Rejection(.noSuchTeam, "no \(to.kind.rawValue) \(to.id) (it is a \(team.kind.rawValue))")
        }
        if team.dismissed && !allowDismissed { throw Rejection(.dismissed, "team \(to.id) was dismissed") }
        return team
    }

    // MARK: Applying

    mutating func applyMessageOp(_ event: Event, into out: inout [Output]) {
        let actor = event.op.actor
        let seq = event.seq
        switch event.op.body {
        case .messageSend(let m):
            if m.to.kind == .p2p {
                sendP2P(m, from: actor, event: event, into: &out)
            } else {
                sendTeam(m, from: actor, event: event, into: &out)
            }

        case .messageRead(let to, let upTo):
            let key = ConvKey(to, actor: actor)
            // A p2p conversation without a stored message does not exist; reading it creates none (SPEC §2).
            if to.kind == .p2p && userConvs[actor]?[key] == nil { break }
            let position = min(upTo ?? (seq - 1), seq - 1)
            userConvs[actor, default: [:]].upsert(key, default: UserConv()) { uc in
                uc.readSeq = max(uc.readSeq, position)
            }
            touch(.userConv(actor, key))

        case .messageReceipt(_, let ids):
            // One index entry per new receipt, and the tally's count (a few bytes, written once per checkpoint).
            for id in ids {
                if let ordinal = receipts[id]!.markRead(actor) {
                    touch(.receiptRead(id, actor, ordinal: ordinal))
                    touch(.receipt(id))
                    residentReaders += 1
                }
            }

        case .messageModify(let id, let content):
            messages[id]!.content = content
            messages[id]!.hasChanged = true
            messages[id]!.modifiedBy = actor
            messages[id]!.modifiedTs = event.ts
            touch(.message(id))

        default:
            preconditionFailure("not a message op: \(event.op.name)")
        }
    }

    private mutating func sendTeam(_ m: MessageSend, from sender: Id, event: Event, into out: inout [Output]) {
        let seq = event.seq
        // The team is read through an in-place (`inout`) access: reading a `Dictionary` value any other way
        // copies it (a `TeamState` copy retains its copy-on-write box; before the box, every field — then
        // the largest source of retains on the writer's thread). Its roster (`slots`, copy-on-write: one
        // retain) is what the receivers are read from, and what a delivery keeps.
        // (`projected.teams`, not the forwarding `teams`: an access to the table alone, beside the workspace's.)
        let (kind, slots, memberCount, receiverCount) = Self.fanOut(
            m, from: sender, in: &projected.teams[m.to.id]!, with: &workspace.fanOut, alerts: wantsDeliveries)
        let key = ConvKey(team: m.to.id, kind: kind)
        let isDirected = m.directedUserIds != nil
        workspace.stats.messages += 1
        workspace.stats.memberDecisions += memberCount
        workspace.stats.deliveries += receiverCount

        // Counting and last message: from the receivers alone (alert mode plays no part). A counted message
        // adds index entries numbered by the running totals: O(1) writes whatever the team's size.
        let ref = MessageRef(seq: seq, messageId: m.messageId)
        let updatesLast = m.isStored && !m.disableUpdateLastMessage
        if !isDirected {
            // One probe of the conversations table for the broadcast's changes to its conversation (made
            // here if it has none yet), not one per field read or written.
            let counts = m.counts
            let convCount = projected.convs.count
            let counted = Self.broadcast(
                to: &projected.convs[key, default: ConvState()], counts: counts, last: updatesLast ? ref : nil)
            if projected.convs.count != convCount || updatesLast { touch(.conv(key)) }  // made here, or changed
            if counts {
                indexed(.counted(key, seq, ordinal: counted))
                indexed(.own(key, sender, seq, ordinal: nextOrdinal(sender, key, directed: false)))
            }
        } else {
            if convs.index(forKey: key) == nil {
                convs[key] = ConvState()
                touch(.conv(key))
            }
            MemberBits.forEachSlot(workspace.fanOut.receivers) { slot in
                let user = slots[slot]!.user
                if m.counts { indexed(.directed(key, user, seq, ordinal: nextOrdinal(user, key, directed: true))) }
                if updatesLast { setIndividualLast(user, key, ref) }
            }
            if updatesLast { setIndividualLast(sender, key, ref) }
        }

        storeMessage(m, sender: sender, event: event, key: key)
        if m.needReceipt && m.isStored {
            // The count, and the receivers only when directed (few); a broadcast's are the roster at `seq`.
            var receivers: [Id]?
            if isDirected {
                receivers = []
                MemberBits.forEachSlot(workspace.fanOut.receivers) { receivers!.append(slots[$0]!.user) }
            }
            receipts[m.messageId] = ReceiptState(receiverCount: receiverCount, directedReceivers: receivers)
            touchAppended(.receipt(m.messageId))
        }
        if wantsDeliveries {
            let delivery = Delivery(seq: seq, to: m.to, messageId: m.messageId, fanOut: workspace.fanOut, roster: slots)
            out.append(.delivery(delivery))
        }
    }

    /// A team broadcast's changes to its conversation, made in place: counted (the running total, its
    /// `counted` entry's ordinal, returned), and its last message (`last`, when it updates it).
    @inline(__always)
    private static func broadcast(to conv: inout ConvState, counts: Bool, last: MessageRef?) -> UInt64 {
        if counts { conv.countedTotal += 1 }
        if let last { conv.last = last }
        return conv.countedTotal
    }

    private mutating func sendP2P(_ m: MessageSend, from sender: Id, event: Event, into out: inout [Output]) {
        let seq = event.seq
        let peer = m.to.id
        let key = ConvKey(p2p: sender, peer)
        let receives = (m.directedUserIds?.contains(peer) ?? true) && (!m.isStatusMessage || isOnline(peer))
        // A message that is not stored creates no conversation (SPEC §2); nor, for the peer, one it does not
        // receive (directed to the sender alone): the peer's view would list a conversation with no message.
        for user in [sender, peer] where m.isStored && userConvs[user]?[key] == nil && (user == sender || receives) {
            userConvs[user, default: [:]][key] = UserConv()
            userConvCount += 1
            touch(.userConv(user, key))
        }
        workspace.stats.messages += 1
        workspace.stats.memberDecisions += 2
        workspace.stats.deliveries += receives ? 1 : 0
        if m.isStored && convs[key] == nil {
            convs[key] = ConvState()
            touch(.conv(key))
        }
        if receives && m.counts { indexed(.directed(key, peer, seq, ordinal: nextOrdinal(peer, key, directed: true))) }
        if m.isStored && !m.disableUpdateLastMessage {
            let ref = MessageRef(seq: seq, messageId: m.messageId)
            if m.directedUserIds?.contains(peer) ?? true {
                convs[key]!.last = ref
                touch(.conv(key))
            } else {
                setIndividualLast(sender, key, ref)  // directed only to the sender: the peer never sees it
            }
        }
        storeMessage(m, sender: sender, event: event, key: key)
        guard wantsDeliveries else { return }
        let reason: SilenceReason? =
            m.disableNotification ? .disableNotification : (m.isStatusMessage ? .statusMessage : nil)
        let receivers = receives ? [peer] : []
        out.append(
            .delivery(
                Delivery(
                    seq: seq, to: m.to, messageId: m.messageId, receivers: receivers,
                    alerted: reason == nil ? receivers : [],
                    silenced: reason == nil ? [] : receivers.map { ($0, reason!) })))
    }

    private mutating func storeMessage(_ m: MessageSend, sender: Id, event: Event, key: ConvKey) {
        var record = StoredMessage(
            seq: event.seq, ts: event.ts, conv: key, sender: sender,
            content: m.isStored ? m.content : .null, isTip: false, stored: m.isStored)
        record.needReceipt = m.needReceipt && m.isStored && key.kind != .p2p
        record.directedUserIds = m.directedUserIds
        messages[m.messageId] = record
        touchAppended(.message(m.messageId))  // a used id is `duplicateMessageId`: the key is new
    }

    /// Numbers the next `own` or `directed` entry of `user` in a conversation: their running total, plus
    /// one. The user has a view of it (a member since their join; a p2p side since its first stored message).
    /// (A `Bool`, not a key path: a key path is looked up and applied at run time, once per receiver.)
    private mutating func nextOrdinal(_ user: Id, _ key: ConvKey, directed: Bool) -> UInt64 {
        let ordinal =
            userConvs.withValue(forKey: user) { views in
                views.modify(key) { uc -> UInt64 in
                    precondition(uc.hasTotals, "\(user)'s view of \(key) was loaded without its totals")
                    if directed {
                        uc.directedTotal += 1
                        return uc.directedTotal
                    }
                    uc.ownTotal += 1
                    return uc.ownTotal
                }
            } ?? nil
        guard let ordinal else { preconditionFailure("\(user) has no view of \(key)") }
        return ordinal
    }

    private mutating func setIndividualLast(_ user: Id, _ key: ConvKey, _ ref: MessageRef) {
        if setLast(user, key, ref) { touch(.userConv(user, key)) }
    }

    /// Sets a view's own last message in place (as `leftConversation` changes it), without listing the
    /// view as changed; whether `user` has a view of `key`.
    @discardableResult
    private mutating func setLast(_ user: Id, _ key: ConvKey, _ ref: MessageRef) -> Bool {
        (userConvs.withValue(forKey: user) { $0.modify(key) { $0.last = ref } } ?? nil) != nil
    }

    /// Runs the fan-out of team message `m` over `team`'s roster into `fanOut`; the team's kind, roster,
    /// member count and receiver count. `inout` only to read the team in place (see `sendTeam`): nothing of
    /// it changes. Without `alerts` (no delivery will list them: a replay, an ingest that prints no
    /// deliveries) only the receivers are decided — and for a broadcast that is not a status message not
    /// even those: every member but the sender (a member: `decide` checked it) receives it, so the count
    /// is the roster's, and nothing reads `fanOut` or the roster afterwards (an empty roster is returned:
    /// the team's would cost a retain and a release of its shared buffer — a cache miss — per message).
    private static func fanOut(
        _ m: MessageSend, from sender: Id, in team: inout TeamState, with fanOut: inout FanOut, alerts: Bool
    ) -> (TeamKind, [Member?], Int, receivers: Int) {
        if !alerts && m.directedUserIds == nil && !m.isStatusMessage {
            assert(team.member(sender) != nil, "a team message's sender is a member")
            return (team.kind, [], team.memberCount, team.memberCount - 1)
        }
        let senderMember = team.member(sender)!
        let directed = m.directedUserIds.map { users in bitset(users, in: team) }
        let mentions = !alerts || m.mentions.isEmpty ? nil : bitset(m.mentions, in: team)
        let silenceAll: SilenceReason? =
            m.disableNotification ? .disableNotification : (m.isStatusMessage ? .statusMessage : nil)
        fanOut.run(
            team.bits,
            FanOut.Message(
                senderSlot: Int(senderMember.slot), senderIsAdmin: senderMember.role.isAdmin, silenceAll: silenceAll,
                onlineOnly: m.isStatusMessage, directed: directed, mentions: mentions),
            alerts: alerts)
        return (team.kind, team.slots, team.memberCount, MemberBits.count(fanOut.receivers))
    }

    /// A bitset of the slots of `users` who are members.
    private static func bitset(_ users: [Id], in team: borrowing TeamState) -> [UInt64] {
        var words = [UInt64](repeating: 0, count: team.bits.wordCount)
        for user in users {
            if let slot = team.slotOf[user] { MemberBits.set(&words, Int(slot), true) }
        }
        return words
    }

    // MARK: Tips as messages

    /// Stores a tip in the team conversation and delivers it to the members and to `removed`.
    ///
    /// `removed`: the members the event removed, listed after the members (for the deliveries only);
    /// `removedCount` of them. A dismissed team's roster is the one it had when dismissed: its members are
    /// all removed, none is a member after the op.
    mutating func deliverTip(
        _ tip: Tip, actor: Id, ts: Int64, removed: [Id], removedCount: Int, into out: inout [Output]
    ) {
        let team = teams[tip.team]!
        let key = ConvKey(team: team.id, kind: team.kind)
        let ref = MessageRef(seq: tip.seq, messageId: tip.messageId)
        var record = StoredMessage(
            seq: tip.seq, ts: ts, conv: key, sender: actor,
            content: .object([("type", .string("tip")), ("text", .string(tip.text))]),
            isTip: true, stored: true)
        record.needReceipt = false
        messages[tip.messageId] = record
        touchAppended(.message(tip.messageId))
        convs[key, default: ConvState()].last = ref
        touch(.conv(key))
        let members = team.dismissed ? 0 : team.memberCount
        // The removed left in this event (`leave`, which listed their views as changed); a dismissed
        // team's views are not frozen: the tip is its conversation's last message, for good.
        if !team.dismissed { for user in removed { setLast(user, key, ref) } }
        workspace.stats.messages += 1
        workspace.stats.memberDecisions += members + removedCount
        workspace.stats.deliveries += members + removedCount
        guard wantsDeliveries else { return }
        workspace.fanOut.run(
            team.dismissed ? MemberBits() : team.bits,
            FanOut.Message(senderSlot: nil, senderIsAdmin: true, silenceAll: .tip))
        // As a team message's: the fan-out's bitsets over the roster, listed when read.
        var delivery = Delivery(
            seq: tip.seq, to: key.conversation(for: actor), messageId: tip.messageId, fanOut: workspace.fanOut,
            roster: team.dismissed ? [] : team.slots)
        delivery.appendSilenced(removed, reason: .tip)
        out.append(.delivery(delivery))
    }

    // MARK: Membership and conversations

    /// A user joined a team: their conversation view starts at the join.
    ///
    /// `key` is the team's conversation; the caller added `user` to the roster with their online bit
    /// (`TeamState.addMember(_:role:joinSeq:online:)`).
    /// `newTeam`: the team was created by this event, so the user has no view of its conversation and
    /// the team is in no user's list: both are appended without a scan for them (a team.create runs this
    /// for each of up to 2,000 members, and a user's views and teams are scanned linearly).
    mutating func joinedConversation(_ user: Id, team id: Id, key: ConvKey, seq: UInt64, newTeam: Bool = false) {
        // One hash of the user per table, mutated in place (this runs once per member of a team.create).
        let added: Bool
        if newTeam {
            userConvs[user, default: [:]].insertNew(key, UserConv(joinSeq: seq))
            added = true
        } else {
            added = userConvs[user, default: [:]].upsert(key, default: UserConv(joinSeq: seq)) { uc in
                uc.joinSeq = seq
                uc.leaveSeq = nil
                uc.last = nil
            }
        }
        if added { userConvCount += 1 }
        touchAppended(.userConv(user, key))
        if newTeam {
            derived.userTeams[user, default: []].insertNew(id)
        } else {
            derived.userTeams[user, default: []].insert(id)
        }
    }

    /// A user left a team: unread freezes at the leave, and so does the last message.
    /// `key`: the team's conversation; `shared`: its last message (the same for every member who leaves
    /// with one op, so the caller looks them up once).
    mutating func leftConversation(_ user: Id, team id: Id, key: ConvKey, shared: MessageRef?, seq: UInt64) {
        // In place: `userConvs[user]` would copy the user's views out (and `lastMessage` did, per member of
        // a dismissed team).
        userConvs.withValue(forKey: user) { views in
            views.modify(key) { uc in
                uc.last = Self.lastMessage(uc, shared: shared)
                uc.leaveSeq = seq
            }
        }
        touchAppended(.userConv(user, key))  // once per leave; the op's tip changes it again unlisted
        // One probe (`userTeams[user]?.remove` and then `isEmpty` and `= nil` were three).
        if let index = derived.userTeams.index(forKey: user) {
            derived.userTeams.values[index].remove(id)
            if derived.userTeams.values[index].isEmpty { derived.userTeams.remove(at: index) }
        }
    }

    // MARK: Reading the projections

    // Unread counts are not answered here: they need the stored indexes (`Store.unreadView`), since the
    // resident state keeps only running totals.

    /// The last message `user` sees in a conversation.
    public func lastMessage(_ user: Id, _ key: ConvKey) -> MessageRef? {
        Self.lastMessage(userConvs[user]?[key], shared: convs[key]?.last)
    }

    /// The last message a view shows, given its conversation's shared last message.
    static func lastMessage(_ uc: UserConv?, shared: MessageRef?) -> MessageRef? {
        if uc?.leaveSeq != nil { return uc?.last }
        guard let own = uc?.last else { return shared }
        guard let shared else { return own }
        return own.seq > shared.seq ? own : shared
    }
}
