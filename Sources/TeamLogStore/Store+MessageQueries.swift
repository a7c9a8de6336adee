public import LMDB
public import TeamLog

/// The message-side queries of SPEC §5 (`unread`, `receipts`) and `message`, answered from the stored
/// projections in one read snapshot, by index lookups: no replay, no scan of a conversation's messages.
extension Store {
    /// `teamlog unread USER`: per conversation the unread count, read position and last message, and
    /// the total. Conversations are listed most recent first.
    public func unreadView(_ user: Id) throws -> JSONValue {
        try readProjections { txn in try unreadView(user, in: txn) }
    }

    /// The unread query inside a given snapshot: one walk of the user's conversation records, then per
    /// conversation `Δcounted − Δown + Δdirected` over (max(read, join), leave], each Δ two cursor seeks
    /// on the index ordinals, so O(conversations × log n) whatever the number of unread messages.
    public func unreadView(_ user: Id, in txn: Transaction) throws -> JSONValue {
        var rows: [(key: ConvKey, unread: Int, readSeq: UInt64, last: MessageRef?)] = []
        let prefix = Array(user.utf8) + [0]
        var convs: [(ConvKey, UserConv)] = []
        try txn.forEach(pdbs.table(.userConvs), from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            var world = World()
            try ProjectionCodec.restore(.userConvs, key: key, value: value, into: &world)
            if let (conv, uc) = world.userConvs[user]?.first { convs.append((conv, uc)) }
            return true
        }
        for (conv, uc) in convs {
            let base = max(uc.readSeq, uc.joinSeq)
            let end = uc.leaveSeq ?? UInt64.max
            let convPrefix = conv.bytes + [0]
            let userPrefix = conv.bytes + [0] + Array(user.utf8) + [0]
            // Entries in (base, end]: the ordinal of the last one ≤ end minus that of the last one ≤ base.
            func between(_ table: ProjectionTable, _ p: [UInt8]) throws -> Int {
                guard end > base else { return 0 }
                return try ordinal(txn, table, p, atOrBefore: end) - ordinal(txn, table, p, atOrBefore: base)
            }
            let unread = try between(.counted, convPrefix) - between(.own, userPrefix) + between(.directed, userPrefix)
            var last = uc.last
            if uc.leaveSeq == nil, let shared = try sharedLast(txn, conv), shared.seq > (last?.seq ?? 0) {
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
        try readProjections { txn in try receiptsView(messageId, in: txn) }
    }

    /// The receipts query inside a given snapshot.
    public func receiptsView(_ messageId: Id, in txn: Transaction) throws -> JSONValue? {
        let id = Array(messageId.utf8)
        guard
            let tally = try id.withUnsafeBytes({ key in
                try txn.withValue(pdbs.table(.receipts), key: key) { value in
                    try value.map { try ProjectionCodec.decodeReceipt($0) }
                }
            }),
            let message = try id.withUnsafeBytes({ key in
                try txn.withValue(pdbs.table(.messages), key: key) { value in
                    try value.map { try ProjectionCodec.decodeMessage($0) }
                }
            })
        else { return nil }
        var reads: [(ordinal: UInt64, user: Id)] = []
        let prefix = ProjectionCodec.prefix(messageId)
        try txn.forEach(pdbs.table(.receiptReads), from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            let user = Id(String(decoding: UnsafeRawBufferPointer(rebasing: key[prefix.count...]), as: UTF8.self))
            reads.append((try ProjectionCodec.decodeOrdinal(value), user))
            return true
        }
        let readUsers = reads.sorted { $0.ordinal < $1.ordinal }.map(\.user)
        let readSet = Set(readUsers)
        let receivers =
            try tally.directedReceivers
            ?? members(txn, team: message.conv.id, at: message.seq).filter { $0 != message.sender }
        return ReceiptState.json(
            messageId: messageId, readUsers: readUsers, unreadUsers: receivers.filter { !readSet.contains($0) })
    }

    /// The members of `team` when the event at `seq` was applied, in slot order: one walk of its member
    /// records and one of its ended memberships.
    func members(_ txn: Transaction, team: Id, at seq: UInt64) throws -> [Id] {
        var found: [(slot: Int32, user: Id)] = []
        let prefix = ProjectionCodec.prefix(team)
        func user(_ key: UnsafeRawBufferPointer) -> Id {
            Id(String(decoding: UnsafeRawBufferPointer(rebasing: key[prefix.count...]), as: UTF8.self))
        }
        try txn.forEach(pdbs.table(.members), from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            let member = try ProjectionCodec.decodeMember(user: user(key), value)
            if member.joinSeq < seq { found.append((member.slot, member.user)) }
            return true
        }
        try txn.forEach(pdbs.table(.pastMembers), from: prefix) { key, value in
            guard key.starts(with: prefix) else { return false }
            for m in try ProjectionCodec.decodePastMemberships(value) where m.spans(seq) {
                found.append((m.slot, user(key)))
            }
            return true
        }
        return found.sorted { $0.slot < $1.slot }.map(\.user)
    }

    /// `teamlog message MESSAGE_ID`: a stored message (or tip), or `nil`.
    public func messageView(_ messageId: Id) throws -> JSONValue? {
        try readProjections { txn in try messageView(messageId, in: txn) }
    }

    /// The message query inside a given snapshot.
    public func messageView(_ messageId: Id, in txn: Transaction) throws -> JSONValue? {
        try Array(messageId.utf8).withUnsafeBytes { key in
            try txn.withValue(pdbs.table(.messages), key: key) { value -> JSONValue? in
                guard let value else { return nil }
                let m = try ProjectionCodec.decodeMessage(value)
                return m.json(id: messageId)
            }
        }
    }

    private func sharedLast(_ txn: Transaction, _ conv: ConvKey) throws -> MessageRef? {
        try conv.bytes.withUnsafeBytes { key in
            try txn.withValue(pdbs.table(.convs), key: key) { value -> MessageRef? in
                guard let value else { return nil }
                var world = World()
                try ProjectionCodec.restore(.convs, key: key, value: value, into: &world)
                return world.convs[conv]?.last
            }
        }
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
        try readProjections { txn in try channelView(id, in: txn) }
    }

    /// The channel query inside a given snapshot.
    public func channelView(_ id: Id, in txn: Transaction) throws -> JSONValue? {
        try Array(id.utf8).withUnsafeBytes { key in
            try txn.withValue(pdbs.table(.channels), key: key) { value -> JSONValue? in
                guard let value else { return nil }
                return try ProjectionCodec.decodeChannel(id: id, value).json
            }
        }
    }
}
