import Money

/// One failed check: a stable snake_case `code`, the JSON `path` of the field, and the checklist rule.
///
/// `rule` is the number in docs/apple-pay-rules.md (1–39); 0 marks Tender's own checks
/// (limits, JSON shape, metadata) that are not in that checklist.
public struct RequestIssue: Hashable, Sendable, Codable, CustomStringConvertible {
    /// Stable machine code, e.g. `unsupported_network_for_version`.
    public let code: String
    /// Field path in the request, e.g. `shippingMethods[1].identifier`; empty for the whole object.
    public let path: String
    /// Checklist rule number (§8), or 0 for Tender's own checks.
    public let rule: Int
    /// For a feature the requested `apiVersion` cannot show: the lowest Apple Pay JS version that can.
    public let requiredAPIVersion: Int?

    /// Creates an issue.
    public init(code: String, path: String, rule: Int, requiredAPIVersion: Int? = nil) {
        self.code = code
        self.path = path
        self.rule = rule
        self.requiredAPIVersion = requiredAPIVersion
    }

    /// `code at path (rule N)`, with the version needed when there is one.
    public var description: String {
        let needs = requiredAPIVersion.map { ", needs apiVersion \($0)" } ?? ""
        return "\(code) at \(path.isEmpty ? "<root>" : path) (rule \(rule)\(needs))"
    }
}

/// The one error type of the PaymentRequest module: every issue found, most important first.
public struct PaymentRequestError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Every failed check; never empty.
    public let issues: [RequestIssue]

    /// Wraps a non-empty list of issues.
    public init(_ issues: [RequestIssue]) {
        precondition(!issues.isEmpty, "a PaymentRequestError needs at least one issue")
        self.issues = issues
    }

    /// Wraps one issue.
    public init(code: String, path: String, rule: Int) {
        self.issues = [RequestIssue(code: code, path: path, rule: rule)]
    }

    /// The first issue's code: the `code` of a problem+json body.
    public var code: String { issues[0].code }

    /// The lowest Apple Pay JS version that would clear every version issue, or nil when none is one.
    public var requiredAPIVersion: Int? { issues.compactMap(\.requiredAPIVersion).max() }

    /// All issues, for logs.
    public var description: String { issues.map(\.description).joined(separator: "; ") }

    /// Maps any error thrown while decoding Tender's own request objects to a PaymentRequestError:
    /// our own errors pass through, `DecodingError`s become `field_missing`, `field_type_invalid`
    /// or `json_malformed` with the field path, and a MoneyError becomes its own code.
    public init(decoding error: any Error) {
        if let own = error as? PaymentRequestError {
            self = own
            return
        }
        if let money = error as? MoneyError {
            self.init(code: money.code.rawValue, path: "", rule: 0)
            return
        }
        guard let decoding = error as? DecodingError else {
            self.init(code: "json_malformed", path: "", rule: 0)
            return
        }
        switch decoding {
        case .keyNotFound(let key, let context):
            self.init(code: "field_missing", path: JSONPath.render(context.codingPath + [key]), rule: 0)
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            self.init(code: "field_type_invalid", path: JSONPath.render(context.codingPath), rule: 0)
        case .dataCorrupted(let context):
            if let money = context.underlyingError as? MoneyError {
                self.init(code: money.code.rawValue, path: JSONPath.render(context.codingPath), rule: 0)
            } else {
                self.init(code: context.codingPath.isEmpty ? "json_malformed" : "field_type_invalid",
                          path: JSONPath.render(context.codingPath), rule: 0)
            }
        @unknown default:
            self.init(code: "json_malformed", path: "", rule: 0)
        }
    }
}

/// Renders Codable coding paths the way issues name fields: `lineItems[1].amount`.
public enum JSONPath {
    /// Joins keys with `.` and array indices as `[i]`.
    public static func render(_ codingPath: [any CodingKey]) -> String {
        var out = ""
        for key in codingPath {
            if let index = key.intValue, key.stringValue.hasPrefix("Index") || key.stringValue == String(index) {
                out += "[\(index)]"
            } else {
                out += out.isEmpty ? key.stringValue : "." + key.stringValue
            }
        }
        return out
    }
}
