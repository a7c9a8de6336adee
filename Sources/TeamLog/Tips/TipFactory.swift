/// Builds the tips of SPEC §3: the table of NIM operation types, ZIM events and change-info types, and
/// the texts the NIM sample renders.
enum TipFactory {
    static func teamName(_ team: TeamState) -> String { team.name.isEmpty ? team.id.string : team.name }

    static func list(_ users: [Id]) -> String { users.map(\.string).joined(separator: ", ") }

    static func zim(_ event: String, _ value: Int, _ actor: Id, _ targets: [Id], _ info: ZIMChangeInfo? = nil)
        -> ZIMTipView
    {
        ZIMTipView(event: event, eventValue: value, operatedUserID: actor, targetUserIDs: targets, changeInfo: info)
    }

    static func nim(_ type: String, _ actor: Id, _ targets: [Id], _ attachment: [(String, String)]? = nil)
        -> NIMTipView
    {
        NIMTipView(
            operationType: type, sourceID: actor, targetIDs: targets, attachment: attachment?.map { ($0.0, $0.1) })
    }

    /// The ZIM view of an update: event 7 only when name, notice or avatar changed.
    static func zimUpdate(_ fields: TeamFields, actor: Id) -> ZIMTipView? {
        var flag = 0
        if fields.name != nil { flag |= 1 }
        if fields.announcement != nil { flag |= 2 }
        if fields.avatar != nil { flag |= 4 }
        let info: ZIMChangeInfo
        switch flag {
        case 0: return nil
        case 1: info = ZIMChangeInfo("GROUP_NAME_CHANGED", 3)
        case 2: info = ZIMChangeInfo("GROUP_NOTICE_CHANGED", 2)
        case 4: info = ZIMChangeInfo("GROUP_AVATAR_URL_CHANGED", 4)
        default:
            info = ZIMChangeInfo("GROUP_DATA_CHANGED", 1)
        }
        var full = info
        if flag.nonzeroBitCount > 1 { full.groupDataFlag = flag }
        full.groupName = fields.name
        full.groupNotice = fields.announcement
        full.groupAvatarUrl = fields.avatar
        return zim("GROUP_INFO_CHANGED", 7, actor, [], full)
    }

    /// The NIM sample's text for an update: the specific phrase for one tag, "information" otherwise.
    static func updateText(_ fields: TeamFields, actor: Id, team: String) -> String {
        let tags = fields.changedTags
        guard tags.count == 1 else { return "\(actor) updated \(team) information" }
        switch tags[0].tag {
        case "name": return "\(actor) updated \(team) group name"
        case "intro": return "\(actor) updated \(team) introduction"
        case "announcement": return "\(actor) updated \(team) announcement"
        case "joinMode": return "\(actor) updated \(team) verification method"
        case "avatar": return "\(actor) updated \(team) avatar"
        case "inviteMode": return "\(actor) updated the permissions for invitation"
        case "beInviteMode": return "\(actor) updated the permissions to require the consent of the invited user"
        case "updateInfoMode": return "\(actor) updated the permissions to edit the group information"
        default: return "\(actor) updated \(team) information"
        }
    }

    /// ZIM member role values.
    static func zimRole(_ role: Role) -> Int {
        switch role {
        case .owner: 1
        case .manager: 2
        case .normal: 3
        }
    }
}
