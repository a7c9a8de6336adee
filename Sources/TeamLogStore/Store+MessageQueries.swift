import LMDB
public import TeamLog

/// The message-side queries of SPEC §5 (`unread`, `receipts`) and `message`, answered from the stored
/// projections in one read snapshot, by index lookups: no replay, no scan of a conversation's messages.
extension Store {
    /// `teamlog unread USER`: per conversation the unread count, read position and last message, and
    /// the total. Conversations are listed most recent first.
    public func unreadView(_ user: Id) throws -> JSONValue {
        try readCommitted { try unreadView(user, in: $0) }
    }

    /// The unread query inside a given snapshot: one walk of the user's conversation records, then per
    /// conversation `Δcounted − Δown + Δdirected` over (max(read, join), leave], each Δ two cursor seeks
    /// on the index ordinals, so O(conversations × log n) whatever the number of unread messages.
    public func unreadView(_ user: Id, in snapshot: ProjectionSnapshot) throws -> JSONValue {
        var rows: [(key: ConvKey, unread: Int, readSeq: UInt64, last: MessageRef?)] = []
        let prefix = Array(user.utf8) + [0]
        var convs: [(ConvKey, UserConv)] = []
        try snapshot.forEach(.userConvs, prefix: prefix) { key, value in
            var world = World()
            try ProjectionCodec.restore(.userConvs, key: key, value: value, into: &world)
            if let (conv, uc) = world.userConvs[user]?.first { convs.append((conv, uc)) }
        }
        for (conv, uc) in convs {
            let base = max(uc.readSeq, uc.joinSeq)
            let end = uc.leaveSeq ?? UInt64.max
            let convPrefix = conv.bytes + [0]
            let userPrefix = conv.bytes + [0] + Array(user.utf8) + [0]
            // Entries in (base, end]: the ordinal of the last one ≤ end minus that of the last one ≤ base.
            func between(_ table: ProjectionTable, _ p: [UInt8]) throws -> Int {
                guard end > base else { return 0 }
                return try snapshot.ordinal(table, p, atOrBefore: end) - snapshot.ordinal(table, p, atOrBefore: base)
            }
            let unread = try between(.counted, convPrefix) - between(.own, userPrefix) + between(.directed, userPrefix)
            var last = uc.last
            if uc.leaveSeq == nil, let shared = try sharedLast(snapshot, conv), shared.seq > (last?.seq ?? 0) {
                last = shared
            }
            rows.append((conv, unread, uc.readSeq, last))
        }
        return World.unreadJSON(user: user, rows: rows)
    }

    /// `teamlog receipts MESSAGE_ID`: read and unread receivers of a `needReceipt` team message, or `nil`.
    ///
    /// Readers come from the `receiptReads` entries under the message, in receipt order (their ordinals);
    /// unread users are the receivers who are not among them: a directed message's stored receivers, or
    /// the roster as of the message's seq (current members who joined before it and ended memberships
    /// that span it) without the sender, in slot order. O(members) here, so that a message stores O(1)
    /// and a receipt writes one entry.
    public func receiptsView(_ messageId: Id) throws -> JSONValue? {
        try readCommitted { try receiptsView(messageId, in: $0) }
    }

    /// The receipts query inside a given snapshot.
    public func receiptsView(_ messageId: Id, in snapshot: ProjectionSnapshot) throws -> JSONValue? {
        let id = Array(messageId.utf8)
        guard let tally = try snapshot.value(.receipts, id, { try ProjectionCodec.decodeReceipt($0) }),
            let message = try snapshot.value(.messages, id, { try ProjectionCodec.decodeMessage($0) })
        else { return nil }
        var reads: [(ordinal: UInt64, user: Id)] = []
        let prefix = ProjectionCodec.prefix(messageId)
        try snapshot.forEach(.receiptReads, prefix: prefix) { key, value in
            let user = Id(String(decoding: UnsafeRawBufferPointer(rebasing: key[prefix.count...]), as: UTF8.self))
            reads.append((try ProjectionCodec.decodeOrdinal(value), user))
        }
        let readUsers = reads.sorted { $0.ordinal < $1.ordinal }.map(\.user)
        let readSet = Set(readUsers)
        let receivers =
            try tally.directedReceivers
            ?? members(snapshot, team: message.conv.id, at: message.seq).filter { $0 != message.sender }
        return ReceiptState.json(
            messageId: messageId, readUsers: readUsers, unreadUsers: receivers.filter { !readSet.contains($0) })
    }

    /// The members of `team` when the event at `seq` was applied, in slot order: one walk of its member
    /// records and one of its ended memberships.
    func members(_ snapshot: ProjectionSnapshot, team: Id, at seq: UInt64) throws -> [Id] {
        var found: [(slot: Int32, user: Id)] = []
        let prefix = ProjectionCodec.prefix(team)
        func user(_ key: UnsafeRawBufferPointer) -> Id {
            Id(String(decoding: UnsafeRawBufferPointer(rebasing: key[prefix.count...]), as: UTF8.self))
        }
        try snapshot.forEach(.members, prefix: prefix) { key, value in
            let member = try ProjectionCodec.decodeMember(user: user(key), value)
            if member.joinSeq < seq { found.append((member.slot, member.user)) }
        }
        try snapshot.forEach(.pastMembers, prefix: prefix) { key, value in
            for m in try ProjectionCodec.decodePastMemberships(value) where m.spans(seq) {
                found.append((m.slot, user(key)))
            }
        }
        return found.sorted { $0.slot < $1.slot }.map(\.user)
    }

    /// `teamlog message MESSAGE_ID`: a stored message (or tip), or `nil`.
    public func messageView(_ messageId: Id) throws -> JSONValue? {
        try readCommitted { try messageView(messageId, in: $0) }
    }

    /// The message query inside a given snapshot.
    public func messageView(_ messageId: Id, in snapshot: ProjectionSnapshot) throws -> JSONValue? {
        try snapshot.value(.messages, Array(messageId.utf8)) {
            try ProjectionCodec.decodeMessage($0).json(id: messageId)
        }
    }

    private func sharedLast(_ snapshot: ProjectionSnapshot, _ conv: ConvKey) throws -> MessageRef? {
        let key = conv.bytes
        return try snapshot.value(.convs, key) { value in
            var world = World()
            try key.withUnsafeBytes { k in try ProjectionCodec.restore(.convs, key: k, value: value, into: &world) }
            return world.convs[conv]?.last
        } ?? nil
    }

    /// The ordinal (running count within its conversation, or conversation × user) of the last index
    /// entry under `prefix` with seq ≤ `seq`; 0 when none. One cursor seek, whatever lies before it.
    func ordinal(_ txn: Transaction, _ table: ProjectionTable, _ prefix: [UInt8], atOrBefore seq: UInt64) throws -> Int
    {
        var probe = prefix
        withUnsafeBytes(of: seq.bigEndian) { probe.append(contentsOf: $0) }
        return try txn.withCursor(pdbs.table(table)) { cursor in
            guard let (key, value) = try cursor.lastAtOrBefore(probe), key.count == prefix.count + 8,
                key.starts(with: prefix)
            else { return 0 }
            var r = ByteReader(value)
            _ = try r.u8()
            return Int(try r.varint())
        }
    }
}

extension Store {
    /// `teamlog channel CHANNEL`: members and pending invitations, or `nil`.
    public func channelView(_ id: Id) throws -> JSONValue? {
        try readCommitted { try channelView(id, in: $0) }
    }

    /// The channel query inside a given snapshot.
    public func channelView(_ id: Id, in snapshot: ProjectionSnapshot) throws -> JSONValue? {
        try snapshot.value(.channels, Array(id.utf8)) { try ProjectionCodec.decodeChannel(id: id, $0).json }
    }
}
