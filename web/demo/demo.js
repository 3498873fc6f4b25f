// The demo store: the page names SKUs and quantities; the store's server side
// (POST /demo/api/checkout-sessions) builds the cart and creates the Tender session with the sandbox
// merchant's credentials, and tender.js runs the checkout.
import { TenderCheckout } from "/tender.js";

const cart = new Map();
let catalog = null;
let session = null;
let generation = 0;

const $ = (id) => document.getElementById(id);

function node(tag, attributes = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes)) n.setAttribute(k, v);
  n.append(...children);
  return n;
}

async function json(path, body) {
  const response = await fetch(path, {
    method: body === undefined ? "GET" : "POST",
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new Error(data?.detail ?? `HTTP ${response.status}`);
  return data;
}

function renderProducts() {
  const list = $("products");
  list.replaceChildren(...catalog.products.map((p) => {
    const button = node("button", { type: "button", "data-testid": "add-to-cart", "data-sku": p.sku,
      "aria-label": `Add ${p.name} to cart` }, "Add to cart");
    button.addEventListener("click", () => add(p.sku));
    return node("li", { class: "product" }, node("h3", {}, p.name), node("p", {}, p.detail),
      node("p", { class: "price" }, `${p.amount} ${catalog.currencyCode}`), button);
  }));
  list.setAttribute("aria-busy", "false");
  $("coupon-hint").textContent = `Try the promo code ${catalog.couponHint} in the sheet.`;
}

function renderCart() {
  const lines = [...cart.entries()].map(([sku, quantity]) => {
    const product = catalog.products.find((p) => p.sku === sku);
    return node("li", {}, `${product.name} × ${quantity}`);
  });
  $("cart-lines").replaceChildren(...lines);
  $("cart-empty").hidden = lines.length > 0;
}

/** A new session for every change of the cart, so the Pay click can start the sheet at once. */
async function add(sku) {
  cart.set(sku, Math.min((cart.get(sku) ?? 0) + 1, 10));
  renderCart();
  $("outcome").replaceChildren();
  const mine = ++generation;
  session = null;
  $("pay-button").disabled = true;
  $("status").textContent = "Preparing checkout…";
  try {
    const created = await json("/demo/api/checkout-sessions",
      { items: [...cart.entries()].map(([s, quantity]) => ({ sku: s, quantity })) });
    if (mine !== generation) return;
    session = created;
    $("status").textContent = `Total ${created.paymentRequest.total.amount} ${created.currencyCode}, ready to pay.`;
    $("pay-button").disabled = false;
  } catch (error) {
    if (mine === generation) $("status").textContent = `Checkout unavailable: ${error.message}`;
  }
}

function showOutcome(ok, text, paymentId) {
  const children = [node("p", { "data-testid": "result", class: ok ? "ok" : "failed" }, text)];
  if (paymentId) {
    children.push(node("p", {}, "Payment id: ", node("code", { "data-testid": "payment-id" }, paymentId)));
    children.push(node("p", {}, node("a", { href: "/console/" }, "See it in the console")));
  }
  $("outcome").replaceChildren(...children);
}

let paying = false;

function pay() {
  if (!session || paying) return;
  const current = session;
  // The button stays enabled (and focusable, so the sheet can hand focus back); a flag stops a double start.
  paying = true;
  // Called synchronously in the click handler with the session at hand, as Safari requires.
  TenderCheckout.start({ sessionId: current.id, clientSecret: current.clientSecret, session: current, baseURL: "",
    sandbox: true })
    .then((result) => {
      paying = false;
      $("pay-button").disabled = true;
      cart.clear();
      renderCart();
      session = null;
      $("status").textContent = "";
      if (result.payment) {
        showOutcome(true, `Payment succeeded: ${result.payment.amount ?? ""} ${result.payment.currencyCode}`.trim(),
          result.payment.id);
      } else {
        // The answer was lost but the session is paid: the console shows the payment.
        showOutcome(true, "Payment succeeded (the receipt was lost on the way; see the console)", null);
      }
    })
    .catch((error) => {
      paying = false;
      const paymentId = error.problem?.paymentId ?? error.result?.payment?.id ?? null;
      showOutcome(false, `Payment failed: ${error.message}`, paymentId);
      // The session stays open after a cancel or a decline: the shopper may try again.
    });
}

document.addEventListener("DOMContentLoaded", async () => {
  $("pay-button").addEventListener("click", pay);
  try {
    catalog = await json("/demo/api/catalog");
    renderProducts();
    renderCart();
  } catch (error) {
    $("status").textContent = `The demo is not available: ${error.message}`;
  }
});
