/// The query shapes of SPEC §5, built from what the store reads (every query, `--at SEQ` included, is
/// answered from LMDB: unread counts need the stored indexes).
extension World {
    /// `teamlog unread USER` from rows (the store computes them from its indexes): conversations most
    /// recent first.
    public static func unreadJSON(user: Id, rows: [(key: ConvKey, unread: Int, readSeq: UInt64, last: MessageRef?)])
        -> JSONValue
    {
        let sorted = rows.sorted { ($0.last?.seq ?? 0, $1.key) > ($1.last?.seq ?? 0, $0.key) }
        return .object([
            ("user", .string(user)),
            ("total", .int(Int64(sorted.reduce(0) { $0 + $1.unread }))),
            (
                "conversations",
                .array(
                    sorted.map { row in
                        .object([
                            ("to", row.key.conversation(for: user).json), ("unread", .int(Int64(row.unread))),
                            ("lastReadSeq", .int(Int64(row.readSeq))),
                            (
                                "lastMessage",
                                row.last.map {
                                    .object([("seq", .int(Int64($0.seq))), ("messageId", .string($0.messageId))])
                                } ?? .null
                            ),
                        ])
                    })
            ),
        ])
    }
}

extension TeamState {
    /// The SPEC §5 shape of a team. `mutedUntil` is null when not muted or when the mute ended before
    /// `now` (the last event time), -1 for a mute with no end.
    public func json(memberCount: Int, members: [Member], now: Int64) -> JSONValue {
        .object([
            ("team", .string(id)), ("kind", .string(kind.rawValue)), ("name", .string(name)),
            ("intro", .string(intro)), ("announcement", .string(announcement)), ("avatar", .string(avatar)),
            ("owner", .string(owner)), ("joinMode", .string(joinMode.rawValue)),
            ("inviteMode", .string(inviteMode.rawValue)), ("beInviteMode", .string(beInviteMode.rawValue)),
            ("updateInfoMode", .string(updateInfoMode.rawValue)), ("muted", .bool(muted)),
            ("dismissed", .bool(dismissed)), ("memberCount", .int(Int64(memberCount))),
            (
                "members",
                .array(
                    members.map { m in
                        let muted: JSONValue = m.isMuted(at: now) ? .int(m.mutedUntil!) : .null
                        return .object([
                            ("user", .string(m.user)), ("role", .string(m.role.rawValue)),
                            ("notify", .string(m.notify.rawValue)), ("mutedUntil", muted),
                        ])
                    })
            ),
        ])
    }
}

extension ReceiptState {
    /// `{"messageId","read","unread","readUsers","unreadUsers"}`: readers in receipt order, the other
    /// receivers in the slot order of the message's fan-out.
    public static func json(messageId: Id, readUsers: [Id], unreadUsers: [Id]) -> JSONValue {
        .object([
            ("messageId", .string(messageId)), ("read", .int(Int64(readUsers.count))),
            ("unread", .int(Int64(unreadUsers.count))), ("readUsers", .array(readUsers.map { .string($0) })),
            ("unreadUsers", .array(unreadUsers.map { .string($0) })),
        ])
    }
}

extension StoredMessage {
    /// The shape of `teamlog message`.
    public func json(id: Id) -> JSONValue {
        var pairs: [(String, JSONValue)] = [
            ("messageId", .string(id)), ("seq", .int(Int64(seq))), ("ts", .int(ts)),
            ("to", conv.conversation(for: sender).json), ("sender", .string(sender)),
            ("kind", .string(isTip ? "tip" : "message")), ("stored", .bool(stored)),
        ]
        if stored {
            pairs.append(("content", content))
            pairs.append(("needReceipt", .bool(needReceipt)))
            pairs.append(("directedUserIds", directedUserIds.map { .array($0.map { .string($0) }) } ?? .null))
            pairs.append(("hasChanged", .bool(hasChanged)))
            pairs.append(
                (
                    "modifyInfo",
                    modifiedBy.map { .object([("by", .string($0)), ("ts", .int(modifiedTs ?? 0))]) } ?? .null
                ))
        }
        return .object(pairs)
    }
}
