// `teamlog-bench --spread FILE [--max-partitions N]`: how a file of ops spreads over 2 … N partitions under
// each partitioning scheme (docs/nats.md, *The partitioning*): the keyed messages per partition as
// `RoutePlanner` plans them (broadcast copies, which every partition gets alike, left out), and the
// largest partition's share against the mean. No NATS: the planner alone, with no `locate` (a modify
// of a message sent before the file goes to its fallback partition).
import Foundation
import TeamLog
import TeamLogRuntime

func spread(_ path: String, maxPartitions: Int) throws {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    let lines = data.split(separator: 0x0A, omittingEmptySubsequences: true).map { Array($0) }
    let counts = Array(2...max(2, maxPartitions))
    print("## Keyed messages per partition: \(lines.count) lines of \(path)\n")
    print("| scheme | N | per partition | largest / mean |")
    print("|---|---:|---|---:|")
    for scheme in PartitionScheme.allCases {
        for n in counts {
            var planner = RoutePlanner(partitions: n, scheme: scheme)
            var perPartition = Array(repeating: 0, count: n)
            for (i, line) in lines.enumerated() {
                let planned = (try? planner.plan(.text(number: i + 1, bytes: line), now: 0)) ?? []
                if planned.count == 1 { perPartition[planned[0].partition] += 1 }
            }
            let mean = Double(perPartition.reduce(0, +)) / Double(n)
            let largest = Double(perPartition.max() ?? 0)
            print(
                "| \(scheme) | \(n) | \(perPartition.map(String.init).joined(separator: " / ")) | "
                    + String(format: "%.3f", mean > 0 ? largest / mean : 0) + " |")
        }
    }
}
