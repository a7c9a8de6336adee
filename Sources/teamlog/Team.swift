import ArgumentParser
import TeamLog
import TeamLogRuntime
import TeamLogStore

/// `teamlog team TEAM [--json]`.
struct Team: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show a team: information, modes and members.")

    @OptionGroup var query: QueryOptions

    @Argument(help: "The team id.")
    var team: String

    func validate() throws { try validateIdArgument(team, "the team id") }

    func run() throws {
        let view = try query.answer(.team, team) { try $0.teamView(Id(team)) }
        if query.json {
            try printOut(view.jsonString)
        } else {
            try printOut(TeamTable.render(view))
        }
    }
}

/// The store as of `seq`, replayed from the log into a scratch store (fails when the log is broken before
/// it) — from `base`'s checkpoint on when given; the caller removes it.
func replayed(_ store: Store, _ seq: UInt64, base: Store.Copy? = nil) throws -> ScratchStore {
    // On a terminal, the replay's position towards `seq` (from the copy's checkpoint when there is one).
    Interrupts.removeLeftoversOnSignal()
    Interrupts.removeAbandonedScratchStores()
    let progress = Progress("replay", total: Int(seq), from: Int(base?.checkpointSeq ?? 0), unit: .count("events"))
    defer { progress.clear() }
    do {
        let scratch = try store.replayed(
            at: seq, base: base?.store, progress: progress.isOn ? { progress.update($0) } : nil)
        progress.finish(at: Int(seq))
        return scratch
    } catch let error as Store.AsOfError {
        throw CLIError(error.description)
    } catch where ScratchStore.isScratchFailure(error) {
        progress.clear()
        throw scratchFailed("the replay to seq \(seq)", error)
    }
}

/// The copy at `path` — a copy of the store (`teamlog backup`) or a directory of them — to answer as of
/// `seq` from (`--at SEQ --base DIR`): the newest at or before `seq` (`Store.newestCopy`). Says on stderr
/// which one of a directory it took.
func chooseBase(_ path: String, for seq: UInt64, of store: String) throws -> Store.Copy {
    let found: (copy: Store.Copy?, seqs: [UInt64])
    do {
        found = try Store.newestCopy(at: path, atOrBefore: seq, excluding: store) { entry, damage in
            printErr("teamlog: passed over the copy \(entry), which cannot be opened (replace it): \(damage.message)")
        }
    } catch let error as StoreError
        where error.code == .notAStore
    {
        throw CLIError(
            "the base \(path) is neither a teamlog store nor a directory of them: give a copy made by `teamlog backup --to DIR`"
        )
    } catch {
        throw cannotOpen(path, error)
    }
    guard let copy = found.copy else {
        if found.seqs.isEmpty {
            throw CLIError("no teamlog store at \(path) nor in it: give a copy made by `teamlog backup --to DIR`")
        }
        let seqs = found.seqs.sorted().map(String.init).joined(separator: ", ")  // by number, not by name
        throw CLIError(
            "no copy at \(path) is at or before seq \(seq) (checkpoint seqs: \(seqs)): give an older copy, or none")
    }
    if copy.path != path { printErr("teamlog: from the copy \(copy.path) at seq \(copy.checkpointSeq)") }
    return copy
}

/// Opens a copy of the store at `store` (`teamlog backup`) for `audit --base`, read-only.
func openBase(_ path: String, of store: String) throws -> Store {
    // Not the store itself: an LMDB environment must not be open twice in one process.
    if Store.sameDirectory(path, store) {
        throw CLIError("the base \(path) is the store itself: give a copy made by `teamlog backup --to DIR`")
    }
    do { return try Store.reader(at: path) } catch let error as StoreError
        where error.code == .notAStore
    {
        // Not the store's "`ingest` creates one": a base is a copy, never made empty.
        throw CLIError("the base \(path) is not a teamlog store: give a copy made by `teamlog backup --to DIR`")
    } catch {
        throw cannotOpen(path, error)
    }
}

/// Opens an existing store for reading.
func openForQuery(_ path: String) throws -> Store {
    do {
        return try Store.reader(at: path)
    } catch {
        throw cannotOpen(path, error)
    }
}

/// The readable form of a team view.
enum TeamTable {
    static func text(_ v: JSONValue?) -> String {
        switch v {
        case .string(let s)?: s
        case .int(let n)?: String(n)
        case .bool(let b)?: b ? "yes" : "no"
        case .null?, nil: "-"
        default: v!.jsonString
        }
    }

    static func render(_ view: JSONValue) -> String {
        var lines: [String] = []
        lines.append("team \(text(view["team"])) (\(text(view["kind"])))  \"\(text(view["name"]))\"")
        for key in [
            "owner", "intro", "announcement", "avatar", "joinMode", "inviteMode", "beInviteMode",
            "updateInfoMode", "muted", "dismissed", "memberCount",
        ] {
            lines.append("  \(key.padding(15))\(text(view[key]))")
        }
        guard case .array(let members)? = view["members"] else { return lines.joined(separator: "\n") }
        let width = max(4, members.map { text($0["user"]).count }.max() ?? 4)
        lines.append("")
        lines.append("  \("USER".padding(width + 2))\("ROLE".padding(9))\("NOTIFY".padding(13))MUTED UNTIL")
        for m in members {
            lines.append(
                "  \(text(m["user"]).padding(width + 2))\(text(m["role"]).padding(9))\(text(m["notify"]).padding(13))\(text(m["mutedUntil"]))"
            )
        }
        return lines.joined(separator: "\n")
    }
}

extension String {
    func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
