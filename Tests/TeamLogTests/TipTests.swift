import TeamLog
import TestSupport
import Testing

/// SPEC §3: op → NIM view, ZIM view (event, change-info type, flags, role, mute time) and text.
@Suite struct TipTests {
    struct TipCase: CustomTestStringConvertible, Sendable {
        let name: String
        let setup: [String]
        let op: String
        /// NIM operation type (nil: no NIM view), ZIM event value (nil: no ZIM view), change-info type value.
        let nim: String?
        let zimEvent: Int?
        let zimChange: Int?
        let text: String
        var targets: [Id] = []
        var attachment: [String: String]? = nil
        var extra: @Sendable (ZIMChangeInfo?) -> Bool = { _ in true }
        var testDescription: String { name }
    }

    static let needConsent =
        baseTeam + [
            op(
                "team.update", "own",
                ["team": "t1", "fields": ["beInviteMode": "needConsent"] as KeyValuePairs<String, Any>])
        ]
    static let freeJoin =
        baseTeam + [
            op("team.update", "own", ["team": "t1", "fields": ["joinMode": "free"] as KeyValuePairs<String, Any>])
        ]

    static let cases: [TipCase] = [
        TipCase(
            name: "create", setup: [], op: op("team.create", "own", ["team": "t1", "name": "Ops", "members": ["a"]]),
            nim: nil, zimEvent: 1, zimChange: nil, text: "own created Ops"),
        TipCase(
            name: "invite without consent", setup: baseTeam,
            op: op("team.invite", "mgr", ["team": "t1", "targets": ["x", "y"]]),
            nim: "invite", zimEvent: 4, zimChange: nil, text: "mgr invited x, y to Ops", targets: ["x", "y"]),
        TipCase(
            name: "accept invitation",
            setup: needConsent + [op("team.invite", "mgr", ["team": "t1", "targets": ["x"]])],
            op: op("team.acceptInvite", "x", ["team": "t1", "inviter": "mgr"]),
            nim: "acceptInvitation", zimEvent: 4, zimChange: nil, text: "x accepted mgr's invitation and joined Ops",
            targets: ["x"]),
        TipCase(
            name: "apply to a free team", setup: freeJoin, op: op("team.apply", "x", ["team": "t1"]),
            nim: "applyPass", zimEvent: 3, zimChange: nil, text: "x joined Ops", targets: ["x"]),
        TipCase(
            name: "approve application", setup: baseTeam + [op("team.apply", "x", ["team": "t1"])],
            op: op("team.approveApply", "mgr", ["team": "t1", "applicant": "x"]),
            nim: "applyPass", zimEvent: 3, zimChange: nil, text: "mgr approved x to join Ops", targets: ["x"]),
        TipCase(
            name: "kick", setup: baseTeam, op: op("team.kick", "own", ["team": "t1", "targets": ["a", "b"]]),
            nim: "kick", zimEvent: 6, zimChange: nil, text: "own removed a, b from Ops", targets: ["a", "b"]),
        TipCase(
            name: "leave", setup: baseTeam, op: op("team.leave", "a", ["team": "t1"]),
            nim: "leave", zimEvent: 5, zimChange: nil, text: "a left Ops", targets: ["a"]),
        TipCase(
            name: "update name", setup: baseTeam,
            op: op("team.update", "own", ["team": "t1", "fields": ["name": "Dev"] as KeyValuePairs<String, Any>]),
            nim: "update", zimEvent: 7, zimChange: 3, text: "own updated Dev group name", attachment: ["name": "Dev"],
            extra: { $0?.groupName == "Dev" && $0?.groupDataFlag == nil }),
        TipCase(
            name: "update announcement", setup: baseTeam,
            op: op(
                "team.update", "own", ["team": "t1", "fields": ["announcement": "hi"] as KeyValuePairs<String, Any>]),
            nim: "update", zimEvent: 7, zimChange: 2, text: "own updated Ops announcement",
            attachment: ["announcement": "hi"],
            extra: { $0?.groupNotice == "hi" && $0?.groupName == nil }),
        TipCase(
            name: "update avatar", setup: baseTeam,
            op: op("team.update", "own", ["team": "t1", "fields": ["avatar": "u://a"] as KeyValuePairs<String, Any>]),
            nim: "update", zimEvent: 7, zimChange: 4, text: "own updated Ops avatar", attachment: ["avatar": "u://a"],
            extra: { $0?.groupAvatarUrl == "u://a" }),
        TipCase(
            name: "update name and avatar", setup: baseTeam,
            op: op(
                "team.update", "own",
                ["team": "t1", "fields": ["name": "Dev", "avatar": "u://a"] as KeyValuePairs<String, Any>]),
            nim: "update", zimEvent: 7, zimChange: 1, text: "own updated Dev information",
            attachment: ["name": "Dev", "avatar": "u://a"],
            extra: { $0?.groupDataFlag == 5 && $0?.groupName == "Dev" && $0?.groupAvatarUrl == "u://a" }),
        TipCase(
            name: "update all three", setup: baseTeam,
            op: op(
                "team.update", "own",
                [
                    "team": "t1",
                    "fields": ["name": "Dev", "announcement": "n", "avatar": "u://a"] as KeyValuePairs<String, Any>,
                ]),
            nim: "update", zimEvent: 7, zimChange: 1, text: "own updated Dev information",
            attachment: ["name": "Dev", "announcement": "n", "avatar": "u://a"],
            extra: { $0?.groupDataFlag == 7 }),
        TipCase(
            name: "update intro only", setup: baseTeam,
            op: op("team.update", "own", ["team": "t1", "fields": ["intro": "we"] as KeyValuePairs<String, Any>]),
            nim: "update", zimEvent: nil, zimChange: nil, text: "own updated Ops introduction",
            attachment: ["intro": "we"]),
        TipCase(
            name: "update join mode", setup: baseTeam,
            op: op("team.update", "own", ["team": "t1", "fields": ["joinMode": "free"] as KeyValuePairs<String, Any>]),
            nim: "update", zimEvent: nil, zimChange: nil, text: "own updated Ops verification method",
            attachment: ["joinMode": "free"]),
        TipCase(
            name: "update invite mode", setup: baseTeam,
            op: op(
                "team.update", "own", ["team": "t1", "fields": ["inviteMode": "all"] as KeyValuePairs<String, Any>]),
            nim: "update", zimEvent: nil, zimChange: nil, text: "own updated the permissions for invitation",
            attachment: ["inviteMode": "all"]),
        TipCase(
            name: "update intro and join mode", setup: baseTeam,
            op: op(
                "team.update", "own",
                ["team": "t1", "fields": ["intro": "we", "joinMode": "free"] as KeyValuePairs<String, Any>]),
            nim: "update", zimEvent: nil, zimChange: nil, text: "own updated Ops information",
            attachment: ["intro": "we", "joinMode": "free"]),
        TipCase(
            name: "mute all", setup: baseTeam, op: op("team.muteAll", "mgr", ["team": "t1", "muted": true]),
            nim: "update", zimEvent: 7, zimChange: 5, text: "mgr muted all members", attachment: ["muteMode": "1"],
            extra: { $0?.groupMuted == true }),
        TipCase(
            name: "unmute all", setup: baseTeam, op: op("team.muteAll", "mgr", ["team": "t1", "muted": false]),
            nim: "update", zimEvent: 7, zimChange: 5, text: "mgr unmuted all members", attachment: ["muteMode": "0"],
            extra: { $0?.groupMuted == false }),
        TipCase(
            name: "dismiss", setup: baseTeam, op: op("team.dismiss", "own", ["team": "t1"]),
            nim: "dismiss", zimEvent: 2, zimChange: nil, text: "own dismissed Ops"),
        TipCase(
            name: "transfer owner", setup: baseTeam,
            op: op("team.transferOwner", "own", ["team": "t1", "target": "a"]),
            nim: "transferOwner", zimEvent: 8, zimChange: 10, text: "own transferred the ownership of Ops to a",
            targets: ["a"]),
        TipCase(
            name: "add managers", setup: baseTeam, op: op("team.addManagers", "own", ["team": "t1", "targets": ["a"]]),
            nim: "addManager", zimEvent: 8, zimChange: 11, text: "own added a as managers of Ops", targets: ["a"],
            extra: { $0?.memberRole == 2 }),
        TipCase(
            name: "remove managers", setup: baseTeam,
            op: op("team.removeManagers", "own", ["team": "t1", "targets": ["mgr"]]),
            nim: "removeManager", zimEvent: 8, zimChange: 11, text: "own removed mgr from the managers of Ops",
            targets: ["mgr"],
            extra: { $0?.memberRole == 3 }),
        TipCase(
            name: "mute member until", setup: baseTeam,
            op: op("team.muteMember", "mgr", ["team": "t1", "target": "a", "muted": true, "until": 90_000]),
            nim: "mute", zimEvent: 8, zimChange: 12, text: "mgr muted a", targets: ["a"],
            extra: { $0?.muteExpiredTime == 90_000 }),
        TipCase(
            name: "mute member forever", setup: baseTeam,
            op: op("team.muteMember", "mgr", ["team": "t1", "target": "a", "muted": true]),
            nim: "mute", zimEvent: 8, zimChange: 12, text: "mgr muted a", targets: ["a"],
            extra: { $0?.muteExpiredTime == -1 }),
        TipCase(
            name: "unmute member", setup: baseTeam,
            op: op("team.muteMember", "mgr", ["team": "t1", "target": "a", "muted": false]),
            nim: "mute", zimEvent: 8, zimChange: 12, text: "mgr unmuted a", targets: ["a"],
            extra: { $0?.muteExpiredTime == 0 }),
    ]

    @Test(arguments: cases)
    func tipViews(_ c: TipCase) throws {
        var m = Machine()
        m.setup(c.setup)
        #expect(m.run(c.op) == nil)
        let tip = try #require(m.tips.first, "\(c.name): no tip")
        #expect(tip.text == c.text)
        #expect(tip.nim?.operationType == c.nim)
        if let nim = tip.nim {
            #expect(nim.sourceID == (try OpParser.parse(line: c.op).get()).actor)
            if !c.targets.isEmpty { #expect(nim.targetIDs == c.targets) }
            if let attachment = c.attachment {
                let got = Dictionary(uniqueKeysWithValues: (nim.attachment ?? []).map { ($0.tag, $0.value) })
                #expect(got == attachment)
            } else {
                #expect(nim.attachment == nil)
            }
        }
        #expect(tip.zim?.eventValue == c.zimEvent)
        #expect(tip.zim?.changeInfo?.typeValue == c.zimChange)
        #expect(c.extra(tip.zim?.changeInfo), "\(c.name): change info \(String(describing: tip.zim?.changeInfo))")
        #expect(tip.messageId == "tip-\(m.world.lastSeq)")
    }

    @Test func zimEventNamesMatchValues() {
        let names = [
            1: "GROUP_CREATED", 2: "GROUP_DISMISSED", 3: "GROUP_JOINED", 4: "GROUP_INVITED", 5: "GROUP_LEFT",
            6: "GROUP_KICKED_OUT", 7: "GROUP_INFO_CHANGED", 8: "GROUP_MEMBER_INFO_CHANGED",
        ]
        for c in Self.cases {
            var m = Machine()
            m.setup(c.setup)
            m.run(c.op)
            if let zim = m.tips.first?.zim { #expect(names[zim.eventValue] == zim.event, "\(c.name)") }
        }
    }

    @Test func transferWithLeaveGivesTwoTips() {
        var m = Machine()
        m.setup(baseTeam)
        #expect(m.run(op("team.transferOwner", "own", ["team": "t1", "target": "a", "leave": true])) == nil)
        #expect(m.tips.map { $0.nim?.operationType } == ["transferOwner", "leave"])
        #expect(m.tips.map(\.messageId) == ["tip-3", "tip-3.1"])
        #expect(m.tips[1].zim?.eventValue == 5)
        #expect(m.deliveries[1].receivers.contains("own"))
        #expect(m.deliveries[0].receivers.contains("own"))
        #expect(m.world.teams["t1"]!.isMember("own") == false)
        #expect(m.world.teams["t1"]!.owner == "a")
    }

    @Test func removedMembersReceiveTheirRemoval() {
        var m = Machine()
        m.setup(baseTeam)
        m.run(op("team.kick", "own", ["team": "t1", "targets": ["a"]]))
        #expect(Set(m.deliveries[0].receivers) == ["own", "mgr", "b", "a"])
        m.run(op("team.leave", "b", ["team": "t1"]))
        #expect(Set(m.deliveries[0].receivers) == ["own", "mgr", "b"])
        m.run(op("team.dismiss", "own", ["team": "t1"]))
        #expect(Set(m.deliveries[0].receivers) == ["own", "mgr"])
        // Tips never alert: every receiver is silenced with reason `tip`.
        #expect(m.deliveries[0].alerted.isEmpty)
        #expect(m.deliveries[0].silenced.allSatisfy { $0.reason == .tip })
    }

    @Test func pendingRequestsAreNoticesNotTips() {
        var m = Machine()
        m.setup(Self.needConsent)
        m.run(op("team.invite", "mgr", ["team": "t1", "targets": ["x", "y"]]))
        #expect(m.tips.isEmpty)
        #expect(
            m.notices.map { "\($0.type.rawValue):\($0.to)<-\($0.from)" } == ["teamInvite:x<-mgr", "teamInvite:y<-mgr"])
        m.run(op("team.rejectInvite", "x", ["team": "t1", "inviter": "mgr"]))
        #expect(m.tips.isEmpty)
        #expect(m.notices.map { "\($0.type.rawValue):\($0.to)<-\($0.from)" } == ["teamInviteRejected:mgr<-x"])
        m.run(op("team.apply", "z", ["team": "t1"]))
        #expect(m.tips.isEmpty)
        #expect(
            Set(m.notices.map { "\($0.type.rawValue):\($0.to)<-\($0.from)" }) == [
                "teamApply:own<-z", "teamApply:mgr<-z",
            ])
        m.run(op("team.rejectApply", "own", ["team": "t1", "applicant": "z"]))
        #expect(m.notices.map { "\($0.type.rawValue):\($0.to)<-\($0.from)" } == ["teamApplyRejected:z<-own"])
        m.run(op("member.setNotify", "a", ["team": "t1", "state": "none"]))
        #expect(m.outputs.isEmpty)
    }
}
