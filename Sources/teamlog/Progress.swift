import TeamLogThreads
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A progress line for a long command, redrawn in place on stderr: position (of the total when known),
/// percent, rate and an estimate of the time left.
///
/// It draws only when stderr is a terminal, unless `TEAMLOG_PROGRESS` is `always` (through a pipe too, so
/// tests can read it) or `never`; disabled, it does nothing at all. `update` may be called per line or per
/// event: it reads the monotonic clock and returns unless `TEAMLOG_PROGRESS_INTERVAL_MS` (default 100) has
/// passed since the last frame, and allocates nothing until it draws. Frames are `\r`, the text and
/// `ESC[K`; `finish` draws a last frame with the final position and then erases the line (`\r ESC[K`), so
/// a terminal is left clean for the command's own output while a captured stderr keeps the final frame.
final class Progress {
    /// What is counted: input bytes (shown in B, KiB, MiB or GiB) or items named by a plural noun.
    enum Unit {
        case bytes
        case count(String)
    }

    /// Whether progress is drawn at all (the environment, then whether stderr is a terminal).
    let isOn: Bool
    private let label: String
    private let unit: Unit
    private let total: Int?
    /// The position before any work (percent and estimate count from it).
    private let first: Int
    private let intervalNs: Int64
    /// stdout is the same terminal: the line is erased before the command writes there.
    private let sharesTerminal: Bool
    private var nextDraw: Int64 = 0
    private var onScreen = false
    /// The last position given.
    private var position: Int
    /// The rate is measured from `anchor` (2 to 4 s back once running): a recent window, not since start.
    private var anchor: (time: Int64, position: Int)
    private var recent: (time: Int64, position: Int)

    /// A progress line `label` counting `unit` from `first` towards `total` (`nil`: unknown, no percent or
    /// estimate); off whatever the environment says when `when` is false. Draws its first frame at once.
    init(_ label: String, total: Int?, from first: Int = 0, unit: Unit, when condition: Bool = true) {
        self.label = label
        self.unit = unit
        self.total = total
        self.first = first
        position = first
        isOn = condition && Self.enabledByEnvironment
        intervalNs =
            Int64(environment("TEAMLOG_PROGRESS_INTERVAL_MS").flatMap { Int($0) }.map { max(0, $0) } ?? 100)
            * 1_000_000
        sharesTerminal = isatty(1) != 0 && isatty(2) != 0
        let now = MonotonicClock.nanoseconds()
        anchor = (now, first)
        recent = anchor
        if isOn { draw(first, now: now) }
    }

    /// `TEAMLOG_PROGRESS=always|never`; otherwise (unset, `auto`, anything else) when stderr is a terminal.
    static var enabledByEnvironment: Bool {
        switch environment("TEAMLOG_PROGRESS") {
        case "always": true
        case "never": false
        default: isatty(2) != 0
        }
    }

    /// The work reached `position`; redraws when the interval has passed since the last frame.
    @inline(__always)
    func update(_ position: Int) {
        guard isOn else { return }
        self.position = position
        let now = MonotonicClock.nanoseconds()
        guard now >= nextDraw else { return }
        draw(position, now: now)
    }

    /// The work ended at `position` (default: the last one given): a last frame, then the line is erased.
    func finish(at position: Int? = nil) {
        guard isOn else { return }
        draw(position ?? self.position, now: MonotonicClock.nanoseconds())
        clear()
    }

    /// Erases the line if a frame is on it (on failure, before an error message).
    func clear() {
        guard onScreen else { return }
        write("\r\u{1B}[K")
        onScreen = false
    }

    /// Called before writing to stdout: when stdout is the same terminal, the line is erased first (the
    /// next update draws it again below what was written).
    func beforeStdout() {
        if sharesTerminal { clear() }
    }

    private func draw(_ position: Int, now: Int64) {
        if now - recent.time >= 2_000_000_000 {
            anchor = recent
            recent = (now, position)
        }
        let seconds = Double(now - anchor.time) / 1e9
        let rate = seconds > 0 && position > anchor.position ? Double(position - anchor.position) / seconds : nil
        var text = "\r" + label + " "
        if let total {
            text += amount(position, scaledLike: total, withUnit: false) + "/" + amount(total, scaledLike: total)
            let span = total - first
            let percent = span > 0 ? min(100, max(0, (position - first) * 100 / span)) : 100
            text += " (\(percent)%)"
            if let rate {
                text += ", " + amount(Int(rate), scaledLike: Int(rate)) + "/s"
                text += ", ~" + Self.duration(Double(max(0, total - position)) / rate) + " left"
            }
        } else {
            text += amount(position, scaledLike: position)
            if let rate { text += ", " + amount(Int(rate), scaledLike: Int(rate)) + "/s" }
        }
        write(text + "\u{1B}[K")
        onScreen = true
        nextDraw = now + intervalNs
    }

    /// `n` in the unit: a plain count and its noun, or bytes in the binary unit `reference` calls for
    /// (one decimal from KiB up), so a position and its total read in the same unit.
    private func amount(_ n: Int, scaledLike reference: Int, withUnit: Bool = true) -> String {
        switch unit {
        case .count(let noun):
            return withUnit ? "\(n) \(noun)" : "\(n)"
        case .bytes:
            return Self.bytes(n, scaledLike: reference, withUnit: withUnit)
        }
    }

    /// `n` bytes in the binary unit `reference` calls for (itself by default), one decimal from KiB up:
    /// `512 B`, `1.5 KiB`, `329.0 MiB`.
    static func bytes(_ n: Int, scaledLike reference: Int? = nil, withUnit: Bool = true) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        let reference = reference ?? n
        var scale = 0
        while scale < units.count - 1 && reference >= 1 << (10 * (scale + 1)) { scale += 1 }
        let number: String
        if scale == 0 {
            number = "\(n)"
        } else {
            let tenths = (n * 10 + (1 << (10 * scale - 1))) >> (10 * scale)  // rounded to 0.1
            number = "\(tenths / 10).\(tenths % 10)"
        }
        return withUnit ? number + " " + units[scale] : number
    }

    /// `12 s`, `7 min`, `3 h`: whole units, rounded up.
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "? s" }
        let s = Int(seconds.rounded(.up))
        if s < 100 { return "\(s) s" }
        if s < 6000 { return "\((s + 59) / 60) min" }
        return "\((s + 3599) / 3600) h"
    }

    private func write(_ text: String) { try? writeAll(2, Array(text.utf8)) }

}
