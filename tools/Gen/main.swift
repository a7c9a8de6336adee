// teamlog-gen: writes a seeded, realistic op stream as JSON Lines to stdout.
//
//   swift run -c release teamlog-gen --ops 1000000 --seed 42 > ops.jsonl
//   swift run -c release teamlog-gen --help

import TeamLog
import TeamLogWorkload

#if canImport(Glibc)
    import Glibc
#endif

func usage() -> Never {
    print(
        """
        usage: teamlog-gen [--ops N] [--seed S] [--users N] [--teams N] [--max-team N] [--mix team|full]
          --ops N        lines to write (default 100000)
          --seed S       RNG seed (default 42)
          --users N      distinct users (default 20000)
          --teams N      live teams kept (default 200)
          --max-team N   largest team at creation, Zipf-distributed from 3 (default 200000)
          --mix team     team operations only; full (default): mostly messages, reads, receipts, signaling
        """)
    exit(2)
}

var options = MixedWorkload.Options()
var ops = 100_000
var args = CommandLine.arguments.dropFirst().makeIterator()
while let arg = args.next() {
    func value() -> String {
        guard let v = args.next() else { usage() }
        return v
    }
    func number<T: FixedWidthInteger>(_ type: T.Type) -> T {
        guard let n = T(value()) else { usage() }
        return n
    }
    switch arg {
    case "--ops": ops = number(Int.self)
    case "--seed": options.seed = number(UInt64.self)
    case "--users": options.users = number(Int.self)
    case "--teams": options.teams = number(Int.self)
    case "--max-team": options.maxTeam = number(Int.self)
    case "--mix":
        switch value() {
        case "team": options.messageShare = 0
        case "full": break
        default: usage()
        }
    default: usage()
    }
}

var workload = MixedWorkload(options: options)
var buffer: [UInt8] = []
buffer.reserveCapacity(1 << 20)
for _ in 0..<ops {
    buffer.append(contentsOf: workload.next().utf8)
    buffer.append(0x0A)
    if buffer.count > 1 << 20 {
        writeOut(buffer)
        buffer.removeAll(keepingCapacity: true)
    }
}
writeOut(buffer)

func writeOut(_ bytes: [UInt8]) {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(1, $0.baseAddress! + offset, $0.count - offset) }
        if n <= 0 { exit(1) }
        offset += n
    }
}
