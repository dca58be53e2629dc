// A page's document for tests/test_view_script.py: just enough of the DOM, the canvas and
// the window for memplan's plan view (memplan/data/plan_view.js) to run in a bare
// JavaScript engine. What a browser would show is kept where a test can read it: the
// pixels each canvas was given (putImageData), the text of every element, the errors
// thrown or logged, and every attempt to reach the network (there must be none).
"use strict";
const page = {errors: [], requests: [], frames: []};

// ------------------------------------------------------------ elements
const VOID = new Set(["br", "hr", "img", "input", "meta", "link", "wbr"]);
const RAW = new Set(["script", "style"]);
const ENTITIES = {amp: "&", lt: "<", gt: ">", quot: '"', "#39": "'", nbsp: " "};
const unescape = s => s.replace(/&(amp|lt|gt|quot|#39|nbsp);/g, (_, e) => ENTITIES[e]);

class Text {
  constructor(text) { this.text = text; this.parentElement = null; }
  get textContent() { return this.text; }
}

class Element {
  constructor(tag, attributes = {}) {
    this.tagName = tag.toUpperCase();
    this.attributes = attributes;
    this.childNodes = [];
    this.parentElement = null;
    this.listeners = {};
    this.style = {};
    this.dataset = {};
    for (const [name, value] of Object.entries(attributes))
      if (name.startsWith("data-")) this.dataset[name.slice(5)] = value;
    if (tag === "canvas") { this.width = 300; this.height = 150; }
    if ("value" in attributes) this._value = attributes.value;
  }
  get id() { return this.attributes.id || ""; }
  get className() { return this.attributes.class || ""; }
  set className(value) { this.attributes.class = value; }
  get children() { return this.childNodes.filter(node => node instanceof Element); }
  get textContent() { return this.childNodes.map(node => node.textContent).join(""); }
  set textContent(text) { this.replaceChildren(new Text(String(text))); }
  set innerHTML(html) { this.replaceChildren(...parse(String(html))); }
  get clientWidth() { return window.innerWidth; }
  get value() {  // a select's is its chosen option's
    if (this._value !== undefined || this.tagName !== "SELECT") return this._value ?? "";
    const options = this.querySelectorAll("option");
    const chosen = options.find(o => "selected" in o.attributes) || options[0];
    return chosen ? chosen.value : "";
  }
  set value(value) { this._value = String(value); }
  append(...nodes) {
    for (const node of nodes) { node.parentElement = this; this.childNodes.push(node); }
  }
  replaceChildren(...nodes) { this.childNodes = []; this.append(...nodes); }
  getBoundingClientRect() {  // one layout: every box at the top left, as wide as the window
    return {left: 0, top: 0, width: this.clientWidth, height: 100};
  }
  addEventListener(type, listener) { (this.listeners[type] ||= []).push(listener); }
  setPointerCapture() {}
  getContext(kind) { return kind === "2d" ? (this.context ||= new Context(this)) : null; }
  matches(selector) {  // tag, #id, .class and tag.class
    const [, tag, id, cls] = /^([a-z]*)(?:#([\w-]+))?(?:\.([\w-]+))?$/.exec(selector);
    return (!tag || this.tagName === tag.toUpperCase()) && (!id || this.id === id) &&
      (!cls || this.className.split(/\s+/).includes(cls));
  }
  querySelectorAll(selector) {
    const found = [];
    const visit = element => element.children.forEach(child => {
      if (child.matches(selector)) found.push(child);
      visit(child);
    });
    visit(this);
    return found;
  }
  querySelector(selector) { return this.querySelectorAll(selector)[0] || null; }
}

// HTML as memplan's pages and templates write it: elements, attributes in quotes or
// bare, text with the five escapes, script and style bodies kept as they are
function parse(html) {
  const root = new Element("body");
  let open = root, at = 0;
  const TAG = /<(\/?)([a-zA-Z][\w-]*)((?:\s+[\w-]+(?:=(?:"[^"]*"|'[^']*'|[^\s>]+))?)*)\s*\/?>/y;
  const ATTRIBUTE = /([\w-]+)(?:=(?:"([^"]*)"|'([^']*)'|([^\s>]+)))?/g;
  while (at < html.length) {
    const lt = html.indexOf("<", at);
    if (lt !== at) {
      const text = html.slice(at, lt < 0 ? html.length : lt);
      open.append(new Text(unescape(text)));
      if (lt < 0) break;
    }
    if (html.startsWith("<!", lt)) { at = html.indexOf(">", lt) + 1; continue; }  // doctype
    TAG.lastIndex = lt;
    const tag = TAG.exec(html);
    if (!tag) throw new SyntaxError(`bad markup at ${lt}: ${html.slice(lt, lt + 40)}`);
    at = TAG.lastIndex;
    const name = tag[2].toLowerCase();
    if (tag[1]) {  // a closing tag: up to the element it closes
      let element = open;
      while (element !== root && element.tagName !== name.toUpperCase()) element = element.parentElement;
      if (element === root) throw new SyntaxError(`</${name}> closes nothing`);
      open = element.parentElement;
      continue;
    }
    const attributes = {};
    for (const [, key, a, b, c] of tag[3].matchAll(ATTRIBUTE)) attributes[key] = unescape(a ?? b ?? c ?? "");
    const element = new Element(name, attributes);
    open.append(element);
    if (RAW.has(name)) {
      const end = html.indexOf(`</${name}>`, at);
      element.append(new Text(html.slice(at, end)));
      at = end + name.length + 3;
    } else if (!VOID.has(name)) {
      open = element;
    }
  }
  return root.childNodes;
}

// ------------------------------------------------------------ the canvas
class Context {  // draws nothing but the pixels the page writes itself; records them
  constructor(canvas) { this.canvas = canvas; this.images = 0; }
  createImageData(width, height) {
    return {width, height, data: new Uint8ClampedArray(width * height * 4)};
  }
  putImageData(image) { this.image = image; this.images += 1; }
  measureText(text) { return {width: 6 * String(text).length}; }
}
for (const name of ["arc", "beginPath", "clearRect", "clip", "closePath", "fill", "fillRect",
                    "fillText", "lineTo", "moveTo", "rect", "restore", "save", "setLineDash",
                    "setTransform", "stroke", "strokeRect", "strokeText"])
  Context.prototype[name] = function () {};

// ------------------------------------------------------------ the window
const document = {
  body: new Element("body"),
  createElement: tag => new Element(tag),
  getElementById(id) { return this.body.querySelector(`#${id}`); },
};
const window = globalThis;  // as in a browser: what a script puts on window is global
Object.assign(window, {
  innerWidth: 1280, innerHeight: 860, devicePixelRatio: 1, listeners: {},
  addEventListener(type, listener) { (this.listeners[type] ||= []).push(listener); },
});
const location = {hash: ""};
const performance = {now: () => Date.now()};
const requestAnimationFrame = callback => { page.frames.push(callback); };
const console = {
  log() {}, info() {}, debug() {},
  warn: (...words) => { page.errors.push("warning: " + words.join(" ")); },
  error: (...words) => { page.errors.push("error: " + words.join(" ")); },
};
function refuse(what) {
  return function (target) { page.requests.push(`${what} ${target}`); throw new Error(`${what}: no network`); };
}
const fetch = refuse("fetch"), XMLHttpRequest = refuse("XMLHttpRequest");
const WebSocket = refuse("WebSocket"), EventSource = refuse("EventSource"), Image = refuse("Image");
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
function atob(base64) {
  let bits = 0, count = 0, out = "";
  for (const c of base64.replace(/=+$/, "")) {
    bits = (bits << 6) | ALPHABET.indexOf(c); count += 6;
    if (count >= 8) { count -= 8; out += String.fromCharCode((bits >> count) & 255); }
  }
  return out;
}

// ------------------------------------------------------------ what the test calls
function openPage(html, hash) {  // the page's body, then its scripts, in order
  location.hash = hash;
  const body = /<body>([\s\S]*)<\/body>/.exec(html);
  document.body.replaceChildren(...parse(body ? body[1] : html));
  for (const script of document.body.querySelectorAll("script")) {
    if (script.attributes.type) continue;  // data, not code
    try { (0, eval)(script.textContent); } catch (error) { page.errors.push(String(error.stack || error)); }
  }
  frames();
}
function frames() {  // every animation frame asked for, as a browser would run them
  for (let k = 0; page.frames.length && k < 100; k++) {
    const due = page.frames.splice(0);
    for (const callback of due) {
      try { callback(performance.now()); } catch (error) { page.errors.push(String(error.stack || error)); }
    }
  }
}
function dispatch(element, type, fields = {}) {  // an event, then the frames it asked for
  const event = {type, target: element, pointerId: 1, preventDefault() {}, ...fields};
  for (const listener of element.listeners[type] || []) {
    try { listener(event); } catch (error) { page.errors.push(String(error.stack || error)); }
  }
  frames();
}
function painted(canvas) {  // how many pixels of the canvas's last image are not blank
  const image = canvas.getContext("2d").image;
  if (!image) return 0;
  const words = new Uint32Array(image.data.buffer);
  let count = 0;
  for (const word of words) if (word) count++;
  return count;
}
