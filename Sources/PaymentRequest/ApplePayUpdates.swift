// Update dictionaries, errors and the authorization result of Apple Pay JS (reference §3).

/// `ApplePayError` (§3.3): a shopper-fixable problem shown on the sheet.
public struct ApplePayError: Codable, Hashable, Sendable {
    /// Apple's `code` member.
    public var code: ApplePayErrorCode
    /// Which contact field is wrong (with `shippingContactInvalid`, `billingContactInvalid`, `addressUnserviceable`).
    public var contactField: ApplePayErrorContactField?
    /// Short localized text; space on the sheet is limited.
    public var message: String

    /// An error for the sheet.
    public init(code: ApplePayErrorCode, contactField: ApplePayErrorContactField? = nil, message: String = "") {
        self.code = code
        self.contactField = contactField
        self.message = message
    }
}

/// The members common to every update dictionary (§3.2).
public protocol ApplePayDetailsUpdate: Codable, Hashable, Sendable {
    /// Always present, even when unchanged: an update without it leaves the sheet stuck (§3.2).
    var newTotal: ApplePayLineItem { get }
    /// The full new list of line items.
    var newLineItems: [ApplePayLineItem]? { get }
}

/// `ApplePayShippingMethodUpdate` (§3.2): answer to `onshippingmethodselected`; Apple defines no `errors`.
public struct ApplePayShippingMethodUpdate: ApplePayDetailsUpdate {
    /// Apple's `newTotal` member.
    public var newTotal: ApplePayLineItem
    /// Apple's `newLineItems` member.
    public var newLineItems: [ApplePayLineItem]?
    /// Apple's `newShippingMethods` member.
    public var newShippingMethods: [ApplePayShippingMethod]?
    /// Apple's `newMultiTokenContexts` member.
    public var newMultiTokenContexts: [ApplePayPaymentTokenContext]?
    /// Apple's `newRecurringPaymentRequest` member.
    public var newRecurringPaymentRequest: ApplePayRecurringPaymentRequest?
    /// Apple's `newAutomaticReloadPaymentRequest` member.
    public var newAutomaticReloadPaymentRequest: ApplePayAutomaticReloadPaymentRequest?
    /// Apple's `newDeferredPaymentRequest` member.
    public var newDeferredPaymentRequest: ApplePayDeferredPaymentRequest?
}

/// `ApplePayShippingContactUpdate` (§3.2): answer to `onshippingcontactselected`.
public struct ApplePayShippingContactUpdate: ApplePayDetailsUpdate {
    /// Apple's `newTotal` member.
    public var newTotal: ApplePayLineItem
    /// Apple's `newLineItems` member.
    public var newLineItems: [ApplePayLineItem]?
    /// Apple's `newShippingMethods` member.
    public var newShippingMethods: [ApplePayShippingMethod]?
    /// Apple's `errors` member.
    public var errors: [ApplePayError]?
    /// Apple's `newMultiTokenContexts` member.
    public var newMultiTokenContexts: [ApplePayPaymentTokenContext]?
    /// Apple's `newRecurringPaymentRequest` member.
    public var newRecurringPaymentRequest: ApplePayRecurringPaymentRequest?
    /// Apple's `newAutomaticReloadPaymentRequest` member.
    public var newAutomaticReloadPaymentRequest: ApplePayAutomaticReloadPaymentRequest?
    /// Apple's `newDeferredPaymentRequest` member.
    public var newDeferredPaymentRequest: ApplePayDeferredPaymentRequest?
}

/// `ApplePayCouponCodeUpdate` (§3.2): answer to `oncouponcodechanged`.
public struct ApplePayCouponCodeUpdate: ApplePayDetailsUpdate {
    /// Apple's `newTotal` member.
    public var newTotal: ApplePayLineItem
    /// Apple's `newLineItems` member.
    public var newLineItems: [ApplePayLineItem]?
    /// Apple's `newShippingMethods` member.
    public var newShippingMethods: [ApplePayShippingMethod]?
    /// Apple's `errors` member.
    public var errors: [ApplePayError]?
    /// Apple's `newMultiTokenContexts` member.
    public var newMultiTokenContexts: [ApplePayPaymentTokenContext]?
    /// Apple's `newRecurringPaymentRequest` member.
    public var newRecurringPaymentRequest: ApplePayRecurringPaymentRequest?
    /// Apple's `newAutomaticReloadPaymentRequest` member.
    public var newAutomaticReloadPaymentRequest: ApplePayAutomaticReloadPaymentRequest?
    /// Apple's `newDeferredPaymentRequest` member.
    public var newDeferredPaymentRequest: ApplePayDeferredPaymentRequest?
}

/// `ApplePayPaymentMethodUpdate` (§3.2): answer to `onpaymentmethodselected`.
public struct ApplePayPaymentMethodUpdate: ApplePayDetailsUpdate {
    /// Apple's `newTotal` member.
    public var newTotal: ApplePayLineItem
    /// Apple's `newLineItems` member.
    public var newLineItems: [ApplePayLineItem]?
    /// Apple's `newShippingMethods` member.
    public var newShippingMethods: [ApplePayShippingMethod]?
    /// Apple's `errors` member.
    public var errors: [ApplePayError]?
    /// Apple's `newMultiTokenContexts` member.
    public var newMultiTokenContexts: [ApplePayPaymentTokenContext]?
    /// Apple's `newRecurringPaymentRequest` member.
    public var newRecurringPaymentRequest: ApplePayRecurringPaymentRequest?
    /// Apple's `newAutomaticReloadPaymentRequest` member.
    public var newAutomaticReloadPaymentRequest: ApplePayAutomaticReloadPaymentRequest?
    /// Apple's `newDeferredPaymentRequest` member.
    public var newDeferredPaymentRequest: ApplePayDeferredPaymentRequest?
}

/// `ApplePayPaymentMethod` (§6.1): produced by Apple, decoded leniently.
public struct ApplePayPaymentMethod: Codable, Hashable, Sendable {
    /// Apple's `displayName` member.
    public var displayName: String?
    /// Apple's `network` member.
    public var network: String?
    /// `debit`, `credit`, `prepaid` or `store`.
    public var type: String?
    /// Apple's `billingContact` member.
    public var billingContact: ApplePayPaymentContact?

    /// A payment method as the sheet reports it.
    public init(displayName: String? = nil, network: String? = nil, type: String? = nil,
                billingContact: ApplePayPaymentContact? = nil) {
        self.displayName = displayName
        self.network = network
        self.type = type
        self.billingContact = billingContact
    }
}

/// `ApplePayPaymentOrderDetails` (§3.5, v14).
public struct ApplePayPaymentOrderDetails: Codable, Hashable, Sendable {
    /// Apple's `orderTypeIdentifier` member.
    public var orderTypeIdentifier: String
    /// Apple's `orderIdentifier` member.
    public var orderIdentifier: String
    /// Apple's `webServiceURL` member.
    public var webServiceURL: String
    /// Apple's `authenticationToken` member.
    public var authenticationToken: String

    /// Wallet order details.
    public init(orderTypeIdentifier: String, orderIdentifier: String, webServiceURL: String,
                authenticationToken: String) {
        self.orderTypeIdentifier = orderTypeIdentifier
        self.orderIdentifier = orderIdentifier
        self.webServiceURL = webServiceURL
        self.authenticationToken = authenticationToken
    }
}

/// `ApplePayPaymentAuthorizationResult` (§3.5): argument of `completePayment`.
public struct ApplePayPaymentAuthorizationResult: Codable, Hashable, Sendable {
    /// `STATUS_SUCCESS`.
    public static let statusSuccess = 0
    /// `STATUS_FAILURE`.
    public static let statusFailure = 1

    /// 0 success or 1 failure (2–4 only for legacy clients).
    public var status: Int
    /// Apple's `errors` member.
    public var errors: [ApplePayError]?
    /// Only with success (§3.5).
    public var orderDetails: ApplePayPaymentOrderDetails?

    /// A result; `orderDetails` is dropped unless `status` is success, since Apple ignores it otherwise.
    public init(status: Int, errors: [ApplePayError]? = nil, orderDetails: ApplePayPaymentOrderDetails? = nil) {
        precondition(status >= 0 && status <= 7, "Apple Pay status out of range")
        self.status = status
        self.errors = errors
        self.orderDetails = status == Self.statusSuccess ? orderDetails : nil
    }

    /// Success, no errors.
    public static var success: Self { Self(status: statusSuccess, errors: []) }

    /// Failure with the given errors.
    public static func failure(_ errors: [ApplePayError] = []) -> Self { Self(status: statusFailure, errors: errors) }
}
