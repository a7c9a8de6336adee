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
    public func receiptsView(_ messageId: Id) throws -> JSONValue? {
        try readProjections { txn in
            try Array(messageId.utf8).withUnsafeBytes { key in
                try txn.withValue(pdbs.table(.receipts), key: key) { value -> JSONValue? in
                    guard let value else { return nil }
                    var world = World()
                    try ProjectionCodec.restore(.receipts, key: key, value: value, into: &world)
                    return world.receipts[messageId]!.json(messageId: messageId)
                }
            }
        }
    }

    /// `teamlog message MESSAGE_ID`: a stored message (or tip), or `nil`.
    public func messageView(_ messageId: Id) throws -> JSONValue? {
        try readProjections { txn in
            try Array(messageId.utf8).withUnsafeBytes { key in
                try txn.withValue(pdbs.table(.messages), key: key) { value -> JSONValue? in
                    guard let value else { return nil }
                    let m = try ProjectionCodec.decodeMessage(value)
                    return m.json(id: messageId)
                }
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
        try readProjections { txn in
            try Array(id.utf8).withUnsafeBytes { key in
                try txn.withValue(pdbs.table(.channels), key: key) { value -> JSONValue? in
                    guard let value else { return nil }
                    return try ProjectionCodec.decodeChannel(id: id, value).json
                }
            }
        }
    }
}
