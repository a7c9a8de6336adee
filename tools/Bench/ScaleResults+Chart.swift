// The `--scale` run as a chart (`scale.svg`): per chunk of history, the ingest's peak RSS, its rate and the
// cost of opening the store it left, each on its own panel — what "flat in history" looks like.

extension ScaleResults {
    /// Three bar panels over the chunks (peak RSS in MB, ingest rate in ops/s, open + 1 op in seconds),
    /// each scaled to its own largest value, with the audit's rate and peak RSS under them.
    var chart: String {
        let panels: [(title: String, unit: String, values: [Double])] = [
            ("peak RSS of each chunk's ingest", "MB", chunks.map { Double($0.ingest.peakRSSBytes) / 1e6 }),
            ("ingest rate of each chunk (wall)", "ops/s", chunks.map(\.wallRate)),
            ("open the store + ingest one op, after each chunk", "s", chunks.map { $0.probe?.seconds ?? 0 }),
        ]
        let barWidth = 56.0
        let gap = 18.0
        let left = 70.0
        let panelHeight = 150.0
        let width = left + Double(max(chunks.count, 1)) * (barWidth + gap) + 40
        let height = Double(panels.count) * (panelHeight + 70) + 50
        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(Int(width))\" height=\"\(Int(height))\" "
        svg += "font-family=\"sans-serif\" font-size=\"12\">\n"
        for (p, panel) in panels.enumerated() {
            let top = 20 + Double(p) * (panelHeight + 70)
            let base = top + 30 + panelHeight
            let largest = max(panel.values.max() ?? 1, 1e-9)
            svg += "<text x=\"0\" y=\"\(fmt(top + 10, 1))\" font-weight=\"bold\">\(panel.title)</text>\n"
            svg += "<line x1=\"\(fmt(left - 4, 1))\" y1=\"\(fmt(base, 1))\" x2=\"\(fmt(width - 20, 1))\" "
            svg += "y2=\"\(fmt(base, 1))\" stroke=\"#999\"/>\n"
            for (i, value) in panel.values.enumerated() {
                let x = left + Double(i) * (barWidth + gap)
                let h = max(1, value / largest * panelHeight)
                svg += "<rect x=\"\(fmt(x, 1))\" y=\"\(fmt(base - h, 1))\" width=\"\(fmt(barWidth, 1))\" "
                svg += "height=\"\(fmt(h, 1))\" fill=\"\(p == 0 ? "#d0784a" : p == 1 ? "#4a7bd0" : "#5aa05a")\"/>\n"
                let label = panel.unit == "s" ? fmt(value, 2) : fmt(value)
                svg += "<text x=\"\(fmt(x + barWidth / 2, 1))\" y=\"\(fmt(base - h - 4, 1))\" "
                svg += "text-anchor=\"middle\">\(label)</text>\n"
                let chunk = chunks[i]
                svg += "<text x=\"\(fmt(x + barWidth / 2, 1))\" y=\"\(fmt(base + 14, 1))\" text-anchor=\"middle\" "
                svg += "fill=\"#444\">\(Self.millions(chunk.firstOp))–\(Self.millions(chunk.firstOp + chunk.ops))</text>\n"
            }
            svg += "<text x=\"0\" y=\"\(fmt(base - panelHeight / 2, 1))\" fill=\"#666\">\(panel.unit)</text>\n"
        }
        var footer = "ops of history per chunk (millions)"
        if let audit, let rate = auditRate {
            footer += "; audit \(fmt(rate)) events/s, peak RSS \(fmt(Double(audit.peakRSSBytes) / 1e6)) MB"
        }
        svg += "<text x=\"0\" y=\"\(fmt(height - 12, 1))\" fill=\"#444\">\(footer)</text>\n"
        return svg + "</svg>\n"
    }

    /// `1500000` → `1.5M`, `0` → `0`.
    static func millions(_ ops: Int) -> String {
        if ops == 0 { return "0" }
        let m = Double(ops) / 1e6
        return (m == m.rounded() ? String(Int(m)) : fmt(m, 1)) + "M"
    }
}
