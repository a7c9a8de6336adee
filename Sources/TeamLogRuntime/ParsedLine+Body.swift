public import TeamLog

extension ParsedLine {
    /// Splits a body held in memory (an HTTP request's) into lines by `LineReader`'s rules — a line ends
    /// at `\n`, the `\r` of a CRLF end is not content, a last line may lack its newline, a line over
    /// `limit` bytes is `tooLong` — and parses each, numbered from 1.
    public static func parseAll(_ body: [UInt8], limit: Int = OpParser.maxLineBytes) -> [ParsedLine] {
        var lines: [ParsedLine] = []
        var start = 0
        var number = 0
        body.withUnsafeBufferPointer { bytes in
            while start < bytes.count {
                let newline = bytes[start...].firstIndex(of: 0x0A)
                let end = newline ?? bytes.count
                var contentEnd = end
                if contentEnd > start && bytes[contentEnd - 1] == 0x0D { contentEnd -= 1 }
                number += 1
                let length = contentEnd - start
                if length > limit {
                    lines.append(parse(.tooLong(number: number, length: length)))
                } else {
                    lines.append(parse(.text(number: number, bytes: Array(bytes[start..<contentEnd]))))
                }
                start = end + 1
            }
        }
        return lines
    }
}
