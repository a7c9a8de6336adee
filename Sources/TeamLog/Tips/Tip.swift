/// A tip message generated from a team operation (SPEC §3), with NIM's and ZIM's views and its text.
public struct Tip: Sendable, Equatable {
    /// Seq of the event that generated it.
    public var seq: UInt64
    /// The team conversation it is appended to.
    public var team: Id
    /// Its message id: `tip-<seq>`, and `tip-<seq>.1` for the second tip of one event (transfer + leave).
    public var messageId: Id
    /// NIM's `NIMTeamNotificationContent`; `nil` for ops NIM has no operation type for (create).
    public var nim: NIMTipView?
    /// ZIM's `ZIMTipsMessage`; `nil` when ZIM has no event for the change (an update of other fields).
    public var zim: ZIMTipView?
    /// Rendered text, as the NIM sample renders it.
    public var text: String
}

/// NIM's view of a team notification.
public struct NIMTipView: Sendable, Equatable {
    /// `NIMTeamOperationType` name: `invite`, `kick`, `update`, …
    public var operationType: String
    /// Who performed it.
    public var sourceID: Id
    /// Whom it targeted.
    public var targetIDs: [Id]
    /// For `update`: changed tag → new value (muteAll uses the tag `muteMode` with "1"/"0").
    public var attachment: [(tag: String, value: String)]?

    public static func == (a: NIMTipView, b: NIMTipView) -> Bool {
        a.operationType == b.operationType && a.sourceID == b.sourceID && a.targetIDs == b.targetIDs
            && a.attachment?.map(\.tag) == b.attachment?.map(\.tag)
            && a.attachment?.map(\.value) == b.attachment?.map(\.value)
    }
}

/// ZIM's view of a tip message.
public struct ZIMTipView: Sendable, Equatable {
    /// `ZIMTipsMessageEvent` name and value.
    public var event: String
    public var eventValue: Int
    /// The operated user and targets.
    public var operatedUserID: Id
    public var targetUserIDs: [Id]
    /// Change info for `GROUP_INFO_CHANGED` (7) and `GROUP_MEMBER_INFO_CHANGED` (8).
    public var changeInfo: ZIMChangeInfo?
}

/// ZIM's `ZIMTipsMessageGroupChangeInfo` / `ZIMTipsMessageGroupMemberChangeInfo`; only the fields the type
/// names are set, as ZIM does.
public struct ZIMChangeInfo: Sendable, Equatable {
    public var type: String
    public var typeValue: Int
    /// Bits name = 1, notice = 2, avatar = 4 (for `GROUP_DATA_CHANGED`).
    public var groupDataFlag: Int?
    public var groupName: String?
    public var groupNotice: String?
    public var groupAvatarUrl: String?
    /// Team-wide mute on or off (for `GROUP_MUTE_CHANGED`).
    public var groupMuted: Bool?
    /// ZIM member role: owner 1, manager 2, member 3 (for `GROUP_MEMBER_ROLE_CHANGED`).
    public var memberRole: Int?
    /// Mute end in ms, -1 for no end, 0 for unmuted (for `GROUP_MEMBER_MUTE_CHANGED`).
    public var muteExpiredTime: Int64?

    init(_ type: String, _ value: Int) {
        self.type = type
        self.typeValue = value
    }
}
