import Foundation
import HTTPServer

/// A validated `POST /v1/payments/{id}/order` body: `{"status"?, "fulfillments"?}` where each fulfillment
/// is one of Apple's order.json fulfillment objects (shipping or pickup) with the fields Tender checks.
struct WalletOrderUpdate: Sendable, Equatable {
    var status: WalletOrderStatus?
    var fulfillments: [JSONValue]?

    /// Largest body and fulfillment count accepted.
    static let bodyBytesMax = 65_536
    static let fulfillmentsMax = 20
    /// Apple's fulfillment statuses, per type (Wallet Orders: ShippingFulfillment, PickupFulfillment).
    static let shippingStatuses: Set<String> = ["open", "processing", "onTheWay", "outForDelivery", "delivered", "shipped",
                                                "issue", "cancelled"]
    static let pickupStatuses: Set<String> = ["open", "processing", "readyForPickup", "pickedUp", "cancelled"]
    /// Fulfillment members Tender accepts (Apple's names); anything else is `unknown_field`.
    static let fulfillmentKeys: Set<String> = [
        "fulfillmentType", "fulfillmentIdentifier", "status", "statusDescription", "carrier", "trackingNumber", "trackingURL",
        "notes", "shippingType", "estimatedDeliveryAt", "deliveredAt", "shippedAt", "recipient", "lineItems", "address",
        "displayName", "pickupAt", "pickedUpAt", "pickupWindowDuration", "location", "barcode", "cancelledAt", "orderedAt",
    ]

    static let notFound = HTTPProblem(status: 404, code: "order_not_found", title: "Not found",
                                      detail: "This payment has no Wallet order.")

    static func invalid(_ field: String, _ code: String, _ message: String) -> HTTPProblem {
        HTTPProblem(status: 400, code: code, title: code == "unknown_field" ? "Unknown field" : "Invalid order update",
                    detail: message, errors: [.init(field: field, code: code, message: message)])
    }

    /// Parses and checks the body; problems name the field.
    static func parse(_ body: [UInt8]) throws(HTTPProblem) -> WalletOrderUpdate {
        guard body.count <= bodyBytesMax else { throw invalid("", "body_too_large", "The body is larger than \(bodyBytesMax) bytes.") }
        let object = try JSONCoding.decode([String: JSONValue].self, from: body)
        for key in object.keys.sorted() where key != "status" && key != "fulfillments" {
            throw invalid(key, "unknown_field", "This field is not accepted.")
        }
        var update = WalletOrderUpdate()
        if let status = object["status"] {
            guard case .string(let text) = status, let parsed = WalletOrderStatus(rawValue: text) else {
                throw invalid("status", "order_status_invalid", "status must be open, completed or cancelled.")
            }
            update.status = parsed
        }
        if let fulfillments = object["fulfillments"] {
            guard case .array(let items) = fulfillments, items.count <= fulfillmentsMax else {
                throw invalid("fulfillments", "fulfillments_invalid", "fulfillments must be an array of at most \(fulfillmentsMax).")
            }
            update.fulfillments = try items.enumerated().map { (index, item) throws(HTTPProblem) in
                try checkFulfillment(item, field: "fulfillments[\(index)]")
            }
        }
        guard update.status != nil || update.fulfillments != nil else {
            throw invalid("", "order_update_empty", "Give status, fulfillments or both.")
        }
        return update
    }

    static func checkFulfillment(_ item: JSONValue, field: String) throws(HTTPProblem) -> JSONValue {
        guard case .object(let members) = item else { throw invalid(field, "fulfillment_invalid", "A fulfillment is an object.") }
        for key in members.keys.sorted() where !fulfillmentKeys.contains(key) {
            throw invalid("\(field).\(key)", "unknown_field", "This field is not accepted.")
        }
        guard case .string(let type)? = members["fulfillmentType"], type == "shipping" || type == "pickup" else {
            throw invalid("\(field).fulfillmentType", "fulfillment_type_invalid", "fulfillmentType must be shipping or pickup.")
        }
        guard case .string(let identifier)? = members["fulfillmentIdentifier"], (1...128).contains(identifier.utf8.count) else {
            throw invalid("\(field).fulfillmentIdentifier", "fulfillment_identifier_invalid",
                          "fulfillmentIdentifier is 1 to 128 characters.")
        }
        let statuses = type == "shipping" ? shippingStatuses : pickupStatuses
        guard case .string(let status)? = members["status"], statuses.contains(status) else {
            throw invalid("\(field).status", "fulfillment_status_invalid",
                          "status must be one of \(statuses.sorted().joined(separator: ", ")) for \(type).")
        }
        if let url = members["trackingURL"] {
            guard case .string(let text) = url, let parsed = URL(string: text), parsed.scheme == "https", parsed.host != nil else {
                throw invalid("\(field).trackingURL", "tracking_url_invalid", "trackingURL must be an https URL.")
            }
        }
        for key in ["carrier", "trackingNumber", "notes", "statusDescription"] {
            if let value = members[key] {
                guard case .string(let text) = value, text.utf8.count <= 256 else {
                    throw invalid("\(field).\(key)", "fulfillment_field_invalid", "\(key) is a string of at most 256 bytes.")
                }
            }
        }
        return item
    }
}
