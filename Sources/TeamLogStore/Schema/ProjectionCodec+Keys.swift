public import TeamLog

/// Reading projection keys back, and counting a state's records per table without building them: what
/// lets the audit walk each stored table once and compare it record by record with the replayed state.
extension ProjectionCodec {
    /// The projection key a stored key of `table` names, or `nil` when the bytes are not a valid key.
    /// Index keys (unread indexes, receipts) come back with ordinal 0 (the ordinal is the record's value,
    /// not part of its key).
    public static func key(_ table: ProjectionTable, _ bytes: UnsafeRawBufferPointer) -> ProjectionKey? {
        func text(_ slice: Slice<UnsafeRawBufferPointer>) -> Id {
            Id(String(decoding: UnsafeRawBufferPointer(rebasing: slice), as: UTF8.self))
        }
        func pair() -> (Id, Id)? {
            guard let zero = bytes.firstIndex(of: 0) else { return nil }
            return (text(bytes[..<zero]), text(bytes[(zero + 1)...]))
        }
        switch table {
        case .teams: return .team(text(bytes[...]))
        case .members: return pair().map { .member($0.0, $0.1) }
        case .pastMembers: return pair().map { .pastMembers($0.0, $0.1) }
        case .invites: return pair().map { .invite($0.0, $0.1) }
        case .applications: return pair().map { .application($0.0, $0.1) }
        case .messages: return .message(text(bytes[...]))
        case .convs: return ConvKey(bytes: bytes).map { .conv($0) }
        case .counted:
            guard let (conv, _, seq) = try? splitSeqKey(bytes, hasUser: false) else { return nil }
            return .counted(conv, seq, ordinal: 0)
        case .own, .directed:
            guard let (conv, user, seq) = try? splitSeqKey(bytes, hasUser: true) else { return nil }
            return table == .own ? .own(conv, user, seq, ordinal: 0) : .directed(conv, user, seq, ordinal: 0)
        case .userConvs:
            guard let zero = bytes.firstIndex(of: 0), let conv = ConvKey(bytes: bytes[(zero + 1)...]) else {
                return nil
            }
            return .userConv(text(bytes[..<zero]), conv)
        case .receipts: return .receipt(text(bytes[...]))
        case .receiptReads: return pair().map { .receiptRead($0.0, $0.1, ordinal: 0) }
        case .presence: return .presence(text(bytes[...]))
        case .channels: return .channel(text(bytes[...]))
        case .offline: return .offline(text(bytes[...]))
        }
    }

    /// How many records each table holds for `world` (what `allRecords` would produce, without it); index
    /// tables from the replay's journal (0 without one).
    public static func recordCounts(_ world: World) -> [ProjectionTable: Int] {
        var counts: [ProjectionTable: Int] = [:]
        counts[.teams] = world.teams.count
        counts[.members] = world.teams.values.reduce(0) { $0 + $1.memberCount }
        counts[.invites] = world.teams.values.reduce(0) { $0 + $1.invites.count }
        counts[.applications] = world.teams.values.reduce(0) { $0 + $1.applications.count }
        counts[.pastMembers] = world.teams.values.reduce(0) { $0 + $1.past.count }
        counts[.messages] = world.messages.count
        counts[.convs] = world.convs.count
        let indexed = world.indexJournal?.counts ?? (counted: 0, own: 0, directed: 0)
        counts[.counted] = indexed.counted
        counts[.own] = indexed.own
        counts[.directed] = indexed.directed
        counts[.userConvs] = world.userConvs.values.reduce(0) { $0 + $1.count }
        counts[.receipts] = world.receipts.count
        counts[.receiptReads] = world.receipts.values.reduce(0) { $0 + $1.readers.count }
        counts[.presence] = world.presence.count
        counts[.channels] = world.channels.count
        counts[.offline] = world.offlineQueues.count
        return counts
    }
}
