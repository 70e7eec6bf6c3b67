// A small markdown subset rendered straight to DOM nodes. Text only ever goes in through
// textContent, so nothing the model or a tool writes can become markup.

function el(tag, text) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  return node;
}

const INLINE = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*)|(\[[^\]]+\]\([^)\s]+\))/;

function safeHref(url) {
  try {
    const parsed = new URL(url, window.location.href);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

/** Append `text` to `parent`, with `code`, **bold**, *em* and [links](http://...). */
function appendInline(parent, text) {
  let rest = text;
  while (rest) {
    const match = INLINE.exec(rest);
    if (!match) {
      parent.append(rest);
      return;
    }
    parent.append(rest.slice(0, match.index));
    const token = match[0];
    if (match[1]) parent.append(el("code", token.slice(1, -1)));
    else if (match[2]) parent.append(el("strong", token.slice(2, -2)));
    else if (match[3]) parent.append(el("em", token.slice(1, -1)));
    else {
      const label = token.slice(1, token.indexOf("]"));
      const href = safeHref(token.slice(token.indexOf("(") + 1, -1));
      if (href) {
        const a = el("a", label);
        a.href = href;
        a.rel = "noopener noreferrer";
        a.target = "_blank";
        parent.append(a);
      } else parent.append(token);
    }
    rest = rest.slice(match.index + token.length);
  }
}

function listItem(line) {
  const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
  if (bullet) return ["ul", bullet[1]];
  const numbered = /^\s*\d+[.)]\s+(.*)$/.exec(line);
  return numbered ? ["ol", numbered[1]] : null;
}

/** Render markdown `source` into a new element (a div of blocks). */
export function renderMarkdown(source) {
  const root = el("div");
  root.className = "md";
  const lines = String(source ?? "").replace(/\r\n/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.startsWith("```")) {
      const code = [];
      i += 1;
      while (i < lines.length && !lines[i].startsWith("```")) code.push(lines[i++]);
      i += 1;
      const pre = el("pre");
      pre.append(el("code", code.join("\n")));
      root.append(pre);
      continue;
    }
    const heading = /^(#{1,4})\s+(.*)$/.exec(line);
    if (heading) {
      const h = el(`h${heading[1].length + 2 > 6 ? 6 : heading[1].length + 2}`);
      appendInline(h, heading[2]);
      root.append(h);
      i += 1;
      continue;
    }
    const item = listItem(line);
    if (item) {
      const list = el(item[0]);
      while (i < lines.length && listItem(lines[i])?.[0] === item[0]) {
        const li = el("li");
        appendInline(li, listItem(lines[i])[1]);
        list.append(li);
        i += 1;
      }
      root.append(list);
      continue;
    }
    if (!line.trim()) {
      i += 1;
      continue;
    }
    const para = [];
    while (
      i < lines.length &&
      lines[i].trim() &&
      !lines[i].startsWith("```") &&
      !/^#{1,4}\s/.test(lines[i]) &&
      !listItem(lines[i])
    ) {
      para.push(lines[i++]);
    }
    const p = el("p");
    para.forEach((text, n) => {
      if (n) p.append(el("br"));
      appendInline(p, text);
    });
    root.append(p);
  }
  return root;
}
