import Foundation
import AppleCodeCore

/// Reads the planner's plain-text reply into subtasks. Small models wrap, number and decorate freely, so the
/// reply is tried as a JSON array of strings, then as one inside a code fence (or inside prose), then as
/// numbered or bulleted lines. An empty result means "no usable plan".
public enum PlanParser {
    public static func subtasks(from reply: String) -> [String] {
        let text = reply.trimmed
        if let items = jsonItems(text) { return items }
        for block in fencedBlocks(text) {
            if let items = jsonItems(block) { return items }
        }
        if let items = embeddedArray(text) { return items }
        return listItems(text)
    }

    /// Fields a model may use when it answers with objects instead of strings, in order of preference.
    private static let itemKeys = ["subtask", "task", "description", "title", "step", "name"]

    /// The non-empty items of a JSON array, or nil when `text` is not an array with at least one usable item.
    static func jsonItems(_ text: String) -> [String]? {
        guard let array = (try? JSONValue.parse(text.trimmed))?.arrayValue else { return nil }
        let items = array.compactMap(itemText).map(oneLine).filter { !$0.isEmpty }
        return items.isEmpty ? nil : items
    }

    private static func itemText(_ value: JSONValue) -> String? {
        if let text = value.stringValue { return text }
        guard let object = value.objectValue else { return nil }
        for key in itemKeys {
            if let text = object[key]?.stringValue { return text }
        }
        return object.entries.lazy.compactMap { $0.value.stringValue }.first
    }

    /// The insides of ``` fences, without the language tag line.
    static func fencedBlocks(_ text: String) -> [String] {
        let parts = text.components(separatedBy: "```")
        guard parts.count >= 3 else { return [] }
        return stride(from: 1, to: parts.count - 1, by: 2).map { index in
            var block = Substring(parts[index])
            if let newline = block.firstIndex(of: "\n"), !block[..<newline].contains("[") {
                block = block[block.index(after: newline)...]
            }
            return String(block)
        }
    }

    /// A JSON array inside prose: from the first "[" to the last "]".
    private static func embeddedArray(_ text: String) -> [String]? {
        guard let open = text.firstIndex(of: "["), let close = text.lastIndex(of: "]"), open < close else {
            return nil
        }
        return jsonItems(String(text[open...close]))
    }

    /// Numbered lines ("1. x", "2) x", "Step 3: x") if there are any, else bulleted lines ("- x", "* x").
    /// Indented lines right after an item continue it.
    static func listItems(_ text: String) -> [String] {
        var numbered: [String] = []
        var bulleted: [String] = []
        var last: ListKind?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = String(line).trimmed
            if trimmed.isEmpty { last = nil; continue }
            if let item = numberedItem(trimmed) {
                numbered.append(item)
                last = .numbered
            } else if let item = bulletedItem(trimmed) {
                bulleted.append(item)
                last = .bulleted
            } else if let kind = last, line.first == " " || line.first == "\t" {
                // A continuation of the item above (models wrap long subtasks).
                if kind == .numbered, let previous = numbered.popLast() {
                    numbered.append(previous + " " + trimmed)
                } else if kind == .bulleted, let previous = bulleted.popLast() {
                    bulleted.append(previous + " " + trimmed)
                }
            } else {
                last = nil
            }
        }
        let items = (numbered.isEmpty ? bulleted : numbered).map(cleanItem).filter { !$0.isEmpty }
        return items
    }

    private enum ListKind { case numbered, bulleted }

    private static func numberedItem(_ line: String) -> String? {
        var rest = Substring(line)
        for prefix in ["Step ", "step ", "STEP "] where rest.hasPrefix(prefix) {
            rest = rest.dropFirst(prefix.count)
        }
        let digits = rest.prefix(while: { $0.isASCII && $0.isNumber })
        guard !digits.isEmpty, digits.count <= 3 else { return nil }
        rest = rest.dropFirst(digits.count)
        guard let mark = rest.first, [".", ")", ":"].contains(mark) else { return nil }
        rest = rest.dropFirst()
        guard let space = rest.first, space == " " || space == "\t" else { return nil }
        return String(rest)
    }

    private static func bulletedItem(_ line: String) -> String? {
        for bullet in ["- ", "* ", "• ", "+ "] where line.hasPrefix(bullet) {
            return String(line.dropFirst(bullet.count))
        }
        return nil
    }

    /// Drops markdown emphasis and stray quotes around an item.
    private static func cleanItem(_ item: String) -> String {
        var text = oneLine(item).replacingOccurrences(of: "**", with: "")
        if text.count >= 2, text.first == "\"", text.last == "\"" { text = String(text.dropFirst().dropLast()) }
        return text.trimmed
    }

    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: { $0 == "\n" || $0 == "\r" || $0 == "\t" || $0 == " " }).joined(separator: " ")
    }
}

extension String {
    var trimmed: String {
        var s = Substring(self)
        while let c = s.first, c.isWhitespace { s = s.dropFirst() }
        while let c = s.last, c.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
