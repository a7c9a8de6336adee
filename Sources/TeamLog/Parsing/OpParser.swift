/// Turns one input line into an `Op`, or a `Rejection` with the exact SPEC code.
///
/// Shape only: no state is consulted. Unknown fields are ignored so producers may add their own.
public enum OpParser {
    /// Longest accepted line in bytes (SPEC: over 1 MiB is `lineTooLong`).
    public static let maxLineBytes = 1 << 20
    /// Longest accepted id list (targets, members): the largest supergroup.
    public static let maxListCount = 200_000
    /// Latest accepted `ts`: the last ms of year 9999 (a `ts` below 0 is `badField` too), so no input can
    /// pin event time out of reach of every later op.
    public static let maxTs: Int64 = 253_402_300_799_999

    /// Parses a whole line (without its newline).
    public static func parse(line: UnsafeRawBufferPointer) -> Result<Op, Rejection> {
        parseLine(line).result
    }

    /// Parses a whole line (without its newline), also returning its `opId` when one could be read, so a
    /// rejection record can name it.
    public static func parseLine(_ line: UnsafeRawBufferPointer) -> (result: Result<Op, Rejection>, opId: Id?) {
        if line.count > maxLineBytes {
            return (
                .failure(Rejection(.lineTooLong, "line is \(line.count) bytes, over the \(maxLineBytes)-byte limit")),
                nil
            )
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(line)
        } catch {
            return (.failure(Rejection(.badJSON, "\(error.message) at byte \(error.offset)")), nil)
        }
        let result = parse(value)
        if case .success(let op) = result { return (result, op.opId) }
        return (result, opId(of: value))
    }

    /// Parses a line given as bytes.
    public static func parse(line: [UInt8]) -> Result<Op, Rejection> {
        line.withUnsafeBytes { parse(line: $0) }
    }

    /// Parses a line given as text.
    public static func parse(line: String) -> Result<Op, Rejection> {
        parse(line: Array(line.utf8))
    }

    /// The opId of a line, when it can be read, for rejection records of lines that failed later checks.
    public static func opId(of value: JSONValue) -> Id? {
        if case .string(let s)? = value["opId"], Ids.problem(s) == nil { return Id(s) }
        return nil
    }

    /// Parses an already decoded JSON value.
    public static func parse(_ value: JSONValue) -> Result<Op, Rejection> {
        do {
            return .success(try parseOp(Fields(value)))
        } catch {
            return .failure(error)
        }
    }

    private static func parseOp(_ f: Fields) throws(Rejection) -> Op {
        let name = try f.requiredText("op")
        guard let parseBody = bodies[name] else { throw Rejection(.unknownOp, "unknown op \"\(name)\"") }
        let actor = try f.requiredId("actor")
        let ts = try f.optionalInt("ts")
        if let ts, ts > maxTs { throw Rejection(.badField, "field \"ts\" is past the end of year 9999 (\(maxTs))") }
        let opId = try f.optionalId("opId")
        let device = try f.optionalId("device")
        let body = try parseBody(f)
        return Op(actor: actor, ts: ts, opId: opId, device: device, body: body)
    }

    private typealias BodyParser = @Sendable (Fields) throws(Rejection) -> OpBody

    private static let bodies: [String: BodyParser] = [
        "team.create": { f throws(Rejection) in
            var c = TeamCreate(team: try f.requiredId("team"))
            c.kind = try f.optionalEnum("kind") ?? .team
            c.name = try f.optionalText("name") ?? ""
            c.members = try f.optionalIdList("members") ?? []
            c.intro = try f.optionalText("intro") ?? ""
            c.announcement = try f.optionalText("announcement") ?? ""
            c.avatar = try f.optionalText("avatar") ?? ""
            c.joinMode = try f.optionalEnum("joinMode") ?? .apply
            c.inviteMode = try f.optionalEnum("inviteMode") ?? .manager
            c.beInviteMode = try f.optionalEnum("beInviteMode") ?? .noConsent
            c.updateInfoMode = try f.optionalEnum("updateInfoMode") ?? .manager
            c.muted = try f.optionalBool("muted") ?? false
            return .teamCreate(c)
        },
        "team.invite": { f throws(Rejection) in
            .teamInvite(team: try f.requiredId("team"), targets: try f.requiredIdList("targets"))
        },
        "team.acceptInvite": { f throws(Rejection) in
            .teamAcceptInvite(team: try f.requiredId("team"), inviter: try f.requiredId("inviter"))
        },
        "team.rejectInvite": { f throws(Rejection) in
            .teamRejectInvite(team: try f.requiredId("team"), inviter: try f.requiredId("inviter"))
        },
        "team.apply": { f throws(Rejection) in
            .teamApply(team: try f.requiredId("team"), message: try f.optionalText("message"))
        },
        "team.approveApply": { f throws(Rejection) in
            .teamApproveApply(team: try f.requiredId("team"), applicant: try f.requiredId("applicant"))
        },
        "team.rejectApply": { f throws(Rejection) in
            .teamRejectApply(team: try f.requiredId("team"), applicant: try f.requiredId("applicant"))
        },
        "team.kick": { f throws(Rejection) in
            .teamKick(team: try f.requiredId("team"), targets: try f.requiredIdList("targets"))
        },
        "team.leave": { f throws(Rejection) in .teamLeave(team: try f.requiredId("team")) },
        "team.update": { f throws(Rejection) in
            let team = try f.requiredId("team")
            guard let raw = f.value["fields"] else { throw Rejection(.missingField, "missing field \"fields\"") }
            guard case .object = raw else { throw Rejection(.badField, "field \"fields\" must be an object") }
            let g = Fields(raw, prefix: "fields.")
            var fields = TeamFields()
            fields.name = try g.optionalText("name")
            fields.intro = try g.optionalText("intro")
            fields.announcement = try g.optionalText("announcement")
            fields.avatar = try g.optionalText("avatar")
            fields.joinMode = try g.optionalEnum("joinMode")
            fields.inviteMode = try g.optionalEnum("inviteMode")
            fields.beInviteMode = try g.optionalEnum("beInviteMode")
            fields.updateInfoMode = try g.optionalEnum("updateInfoMode")
            fields.ext = try g.optionalText("ext")
            if case .object(let pairs) = raw, let unknown = pairs.first(where: { !TeamFields.known.contains($0.0) }) {
                throw Rejection(.badField, "field \"fields.\(unknown.0)\" is not an updatable team field")
            }
            if fields.isEmpty { throw Rejection(.missingField, "field \"fields\" names no field to change") }
            return .teamUpdate(team: team, fields: fields)
        },
        "team.muteAll": { f throws(Rejection) in
            .teamMuteAll(team: try f.requiredId("team"), muted: try f.requiredBool("muted"))
        },
        "team.dismiss": { f throws(Rejection) in .teamDismiss(team: try f.requiredId("team")) },
        "team.transferOwner": { f throws(Rejection) in
            .teamTransferOwner(
                team: try f.requiredId("team"), target: try f.requiredId("target"),
                leave: try f.optionalBool("leave") ?? false)
        },
        "team.addManagers": { f throws(Rejection) in
            .teamAddManagers(team: try f.requiredId("team"), targets: try f.requiredIdList("targets"))
        },
        "team.removeManagers": { f throws(Rejection) in
            .teamRemoveManagers(team: try f.requiredId("team"), targets: try f.requiredIdList("targets"))
        },
        "team.muteMember": { f throws(Rejection) in
            let muted = try f.requiredBool("muted")
            return .teamMuteMember(
                team: try f.requiredId("team"), target: try f.requiredId("target"), muted: muted,
                until: muted ? try f.optionalInt("until") : nil)
        },
        "member.setNotify": { f throws(Rejection) in
            .memberSetNotify(team: try f.requiredId("team"), state: try f.requiredEnum("state"))
        },
        "message.send": { f throws(Rejection) in
            var m = MessageSend(
                to: try f.requiredConversation("to"), messageId: try f.requiredId("messageId"),
                content: try f.requiredContent("content"))
            if Ids.isReservedTipId(m.messageId.string) {
                throw Rejection(.badId, "message id \"\(m.messageId)\" has the form reserved for tips (tip-<seq>)")
            }
            m.needReceipt = try f.optionalBool("needReceipt") ?? false
            m.directedUserIds = try f.optionalIdList("directedUserIds")
            if m.directedUserIds?.isEmpty == true { throw Rejection(.badField, "field \"directedUserIds\" is empty") }
            m.disableNotification = try f.optionalBool("disableNotification") ?? false
            m.disableUpdateLastMessage = try f.optionalBool("disableUpdateLastMessage") ?? false
            m.isStatusMessage = try f.optionalBool("isStatusMessage") ?? false
            m.isPersisted = try f.optionalBool("isPersisted") ?? true
            let counted = try f.optionalBool("isCounted")
            m.explicitIsCounted = counted  // its combinations with the other flags are decide's to check
            // Unstored and status messages never count; `isCounted` defaults to true only for stored ones.
            m.isCounted = (counted ?? true) && m.isPersisted && !m.isStatusMessage
            m.metadata = try f.optionalStringMap("metadata")
            m.mentions = try f.optionalIdList("mentions") ?? []
            return .messageSend(m)
        },
        "message.read": { f throws(Rejection) in
            let upTo = try f.optionalInt("upTo")
            return .messageRead(to: try f.requiredConversation("to"), upTo: upTo.map { UInt64($0) })
        },
        "message.receipt": { f throws(Rejection) in
            .messageReceipt(to: try f.requiredConversation("to"), messageIds: try f.requiredIdList("messageIds", naming: "message"))
        },
        "message.modify": { f throws(Rejection) in
            .messageModify(messageId: try f.requiredId("messageId"), content: try f.requiredContent("content"))
        },
        "client.login": { f throws(Rejection) in
            _ = try f.requiredId("device")
            return .clientLogin
        },
        "client.logout": { f throws(Rejection) in
            _ = try f.requiredId("device")
            return .clientLogout
        },
        "channel.create": { f throws(Rejection) in
            .channelCreate(
                channel: try f.requiredId("channel"), kind: try f.optionalEnum("kind") ?? .audio,
                ext: try f.optionalText("ext"))
        },
        "channel.join": { f throws(Rejection) in .channelJoin(channel: try f.requiredId("channel")) },
        "channel.invite": { f throws(Rejection) in
            var i = ChannelInvite(
                channel: try f.requiredId("channel"), target: try f.requiredId("target"),
                requestId: try f.requiredId("requestId"))
            i.offline = try f.optionalBool("offline") ?? false
            i.pushText = try f.optionalText("pushText")
            return .channelInvite(i)
        },
        "channel.cancelInvite": { f throws(Rejection) in
            .channelCancelInvite(
                channel: try f.requiredId("channel"), target: try f.requiredId("target"),
                requestId: try f.requiredId("requestId"))
        },
        "channel.reject": { f throws(Rejection) in
            .channelReject(
                channel: try f.requiredId("channel"), inviter: try f.requiredId("inviter"),
                requestId: try f.requiredId("requestId"))
        },
        "channel.accept": { f throws(Rejection) in
            .channelAccept(
                channel: try f.requiredId("channel"), inviter: try f.requiredId("inviter"),
                requestId: try f.requiredId("requestId"))
        },
        "channel.leave": { f throws(Rejection) in .channelLeave(channel: try f.requiredId("channel")) },
        "channel.close": { f throws(Rejection) in .channelClose(channel: try f.requiredId("channel")) },
        "channel.control": { f throws(Rejection) in
            .channelControl(
                channel: try f.requiredId("channel"), target: try f.optionalId("target"),
                data: try f.optionalText("data") ?? "")
        },
        "clock.tick": { _ throws(Rejection) in .clockTick },
    ]

    /// Every op name this parser knows.
    public static var knownOps: [String] { bodies.keys.sorted() }
}

extension TeamFields {
    /// The keys `team.update` accepts inside `fields`.
    static let known: Set<String> = [
        "name", "intro", "announcement", "avatar", "joinMode", "inviteMode", "beInviteMode", "updateInfoMode", "ext",
    ]
}

/// Typed access to an object's fields, producing the SPEC codes: a missing required field is
/// `missingField`, a present field of the wrong type or value is `badField`, a bad id is `badId`.
/// `null` counts as missing.
struct Fields {
    let value: JSONValue
    let prefix: String

    init(_ value: JSONValue, prefix: String = "") {
        self.value = value
        self.prefix = prefix
    }

    private func lookup(_ key: String) throws(Rejection) -> JSONValue? {
        guard case .object = value else { throw Rejection(.badJSON, "a line must be a JSON object") }
        let v = value[key]
        if case .null? = v { return nil }
        return v
    }

    private func missing(_ key: String) -> Rejection { Rejection(.missingField, "missing field \"\(prefix)\(key)\"") }
    private func bad(_ key: String, _ what: String) -> Rejection {
        Rejection(.badField, "field \"\(prefix)\(key)\" \(what)")
    }

    func requiredText(_ key: String) throws(Rejection) -> String {
        guard let v = try optionalText(key) else { throw missing(key) }
        return v
    }

    func optionalText(_ key: String) throws(Rejection) -> String? {
        switch try lookup(key) {
        case nil: return nil
        case .string(let s)?: return s
        case .invalidString?: throw bad(key, "is not valid UTF-8")
        default: throw bad(key, "must be a string")
        }
    }

    func requiredId(_ key: String) throws(Rejection) -> Id {
        guard let v = try optionalId(key) else { throw missing(key) }
        return v
    }

    func optionalId(_ key: String) throws(Rejection) -> Id? {
        switch try lookup(key) {
        case nil: return nil
        case .string(let s)?:
            if let problem = Ids.problem(s) { throw Rejection(.badId, "id in \"\(prefix)\(key)\" \(problem)") }
            return Id(s)
        case .invalidString?: throw Rejection(.badId, "id in \"\(prefix)\(key)\" is not valid UTF-8")
        default: throw bad(key, "must be a string id")
        }
    }

    /// A non-empty array of ids; `naming` is what they are, for the message when it is empty.
    func requiredIdList(_ key: String, naming noun: String = "user") throws(Rejection) -> [Id] {
        guard let v = try optionalIdList(key) else { throw missing(key) }
        if v.isEmpty { throw bad(key, "must name at least one \(noun)") }
        return v
    }

    /// An array of ids, duplicates dropped (first occurrence kept).
    func optionalIdList(_ key: String) throws(Rejection) -> [Id]? {
        switch try lookup(key) {
        case nil: return nil
        case .array(let items)?:
            if items.count > OpParser.maxListCount {
                throw bad(key, "has \(items.count) ids, more than \(OpParser.maxListCount)")
            }
            var seen = Set<Id>()  // byte-wise: `café` precomposed and decomposed are two ids
            var out: [Id] = []
            out.reserveCapacity(items.count)
            for (i, item) in items.enumerated() {
                switch item {
                case .string(let s):
                    if let problem = Ids.problem(s) {
                        throw Rejection(.badId, "id \(i) in \"\(prefix)\(key)\" \(problem)")
                    }
                    if seen.insert(Id(s)).inserted { out.append(Id(s)) }
                case .invalidString:
                    throw Rejection(.badId, "id \(i) in \"\(prefix)\(key)\" is not valid UTF-8")
                default:
                    throw bad(key, "must be an array of string ids")
                }
            }
            return out
        default: throw bad(key, "must be an array of string ids")
        }
    }

    /// A conversation object `{"type":"team"|"superTeam"|"p2p","id":ID}`.
    func requiredConversation(_ key: String) throws(Rejection) -> Conversation {
        guard let v = try lookup(key) else { throw missing(key) }
        guard case .object = v else { throw bad(key, "must be a conversation object {\"type\",\"id\"}") }
        let g = Fields(v, prefix: prefix + key + ".")
        let kind: Conversation.Kind = try g.requiredEnum("type")
        return Conversation(kind, try g.requiredId("id"))
    }

    /// Message content: an object with a string `type` (shape only: which types a client may send is
    /// `decide`'s rule, checked after a reused message id).
    ///
    /// Strings with invalid UTF-8 (or unpaired surrogate escapes) and numbers beyond a `Double`'s range are
    /// accepted in content and kept as every output shows them, each bad sequence a U+FFFD and each such
    /// number `null` (`JSONValue.repaired`): so the log holds what readers see, and `teamlog log` exports an
    /// op that is accepted again as the same op. (Logs written before this kept the raw bytes; their events
    /// replay as they always did, and are shown repaired.)
    func requiredContent(_ key: String) throws(Rejection) -> JSONValue {
        guard let v = try lookup(key) else { throw missing(key) }
        guard case .object = v else { throw bad(key, "must be an object with a \"type\"") }
        _ = try Fields(v, prefix: prefix + key + ".").requiredText("type")
        return v.repaired
    }

    /// An object of string values (message metadata), in the order given.
    func optionalStringMap(_ key: String) throws(Rejection) -> [(key: String, value: String)] {
        guard let v = try lookup(key) else { return [] }
        guard case .object(let pairs) = v else { throw bad(key, "must be an object of strings") }
        var out: [(key: String, value: String)] = []
        for (k, value) in pairs {
            guard case .string(let text) = value else { throw bad(key + "." + k, "must be a string") }
            out.append((k, text))
        }
        return out
    }

    func requiredBool(_ key: String) throws(Rejection) -> Bool {
        guard let v = try optionalBool(key) else { throw missing(key) }
        return v
    }

    func optionalBool(_ key: String) throws(Rejection) -> Bool? {
        switch try lookup(key) {
        case nil: return nil
        case .bool(let b)?: return b
        default: throw bad(key, "must be true or false")
        }
    }

    /// A non-negative integer (ms times, seqs); fractions, negatives and numbers past Int64 are `badField`.
    func optionalInt(_ key: String) throws(Rejection) -> Int64? {
        switch try lookup(key) {
        case nil: return nil
        case .int(let n)?:
            if n < 0 { throw bad(key, "must not be negative") }
            return n
        case .double(let d)?:
            if d.isFinite, d == d.rounded(), d >= 0, d < 9.2e18 { return Int64(d) }
            throw bad(key, "must be a whole number in range")
        default: throw bad(key, "must be an integer")
        }
    }

    func requiredEnum<E: RawRepresentable & CaseIterable>(_ key: String) throws(Rejection) -> E
    where E.RawValue == String {
        guard let v: E = try optionalEnum(key) else { throw missing(key) }
        return v
    }

    func optionalEnum<E: RawRepresentable & CaseIterable>(_ key: String) throws(Rejection) -> E?
    where E.RawValue == String {
        guard let text = try optionalText(key) else { return nil }
        guard let v = E(rawValue: text) else {
            let allowed = E.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw bad(key, "is \"\(text)\"; expected one of \(allowed)")
        }
        return v
    }
}
