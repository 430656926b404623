// Small DOM helpers: element building, dropdown menus, modal dialogs and toasts (no framework on purpose: the
// page is one screen and the bundle must stay small).

import { t } from './i18n.js';

/** h('button.primary#save', {onclick}, 'Save') → element. Class/id shorthand in the tag; `i18n` keys translate. */
export function h(spec, attrs = {}, ...children) {
  const [, tag = 'div', rest = ''] = /^([a-z0-9]*)(.*)$/i.exec(spec);
  const el = document.createElement(tag || 'div');
  for (const part of rest.match(/[.#][^.#]+/g) || []) {
    if (part[0] === '.') el.classList.add(part.slice(1)); else el.id = part.slice(1);
  }
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value == null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'i18n') { el.dataset.i18n = value; el.textContent = t(value); }
    else if (key === 'i18nTitle') { el.dataset.i18nTitle = value; el.title = t(value); el.setAttribute('aria-label', t(value)); }
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key in el && typeof value !== 'string') el[key] = value;
    else el.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Re-translate every element that was built with `i18n` / `i18nTitle`. */
export function retranslate(root = document) {
  for (const el of root.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const el of root.querySelectorAll('[data-i18n-title]')) {
    el.title = t(el.dataset.i18nTitle);
    el.setAttribute('aria-label', t(el.dataset.i18nTitle));
  }
  for (const el of root.querySelectorAll('[data-i18n-placeholder]')) el.placeholder = t(el.dataset.i18nPlaceholder);
}

let openMenu = null;
export function closeMenus() {
  if (openMenu) { openMenu.classList.remove('open'); openMenu = null; }
}
document.addEventListener('click', (event) => { if (openMenu && !openMenu.contains(event.target)) closeMenus(); });
document.addEventListener('keydown', (event) => { if (event.key === 'Escape') closeMenus(); });

/**
 * A menu button with a dropdown. items: {label (i18n key), action, id, check: () => bool, sep: true}.
 */
export function menu(id, labelKey, items) {
  const list = h('div.menu-list', { role: 'menu' });
  const wrapper = h(`div.menu#${id}`, {},
    h('button.menu-button', { type: 'button', i18n: labelKey, 'aria-haspopup': 'true',
      onclick: (event) => {
        event.stopPropagation();
        const wasOpen = wrapper.classList.contains('open');
        closeMenus();
        if (!wasOpen) {
          refreshChecks();
          wrapper.classList.add('open');
          openMenu = wrapper;
          if (event.detail === 0) list.querySelector('.menu-item')?.focus(); // opened from the keyboard
        }
      } }),
    list);
  // Arrow keys move through the items; Escape closes and returns to the menu button.
  list.addEventListener('keydown', (event) => {
    const items = [...list.querySelectorAll('.menu-item')];
    const at = items.indexOf(document.activeElement);
    if (event.key === 'ArrowDown' || event.key === 'ArrowUp') {
      event.preventDefault();
      const step = event.key === 'ArrowDown' ? 1 : -1;
      items[(at + step + items.length) % items.length].focus();
    } else if (event.key === 'Escape') {
      closeMenus();
      wrapper.querySelector('.menu-button').focus();
    }
  });
  const checks = [];
  for (const item of items) {
    if (item.sep) { list.append(h('div.menu-sep', { role: 'separator' })); continue; }
    const mark = h('span.menu-check', {}, '');
    const button = h('button.menu-item', {
      type: 'button', role: item.check ? 'menuitemcheckbox' : 'menuitem', dataset: { action: item.id },
      onclick: (event) => { event.stopPropagation(); closeMenus(); item.action(); },
    }, mark, h('span', { i18n: item.label }), item.keys ? h('kbd', {}, item.keys) : null);
    if (item.check) checks.push([mark, button, item.check]);
    list.append(button);
  }
  function refreshChecks() {
    for (const [mark, button, check] of checks) {
      const on = !!check();
      mark.textContent = on ? '✓' : '';
      button.setAttribute('aria-checked', String(on));
    }
  }
  return wrapper;
}

const layer = () => document.getElementById('modal-layer');

/** Show a modal dialog; returns {el, close}. `wide` for big content (audit, diff). */
export function modal(id, titleKey, body, { wide = false, actions = [], onClose, dismissable = true, passive = false } = {}) {
  document.getElementById(id)?.remove();
  const close = () => { dialog.remove(); onClose?.(); };
  // A non-dismissable dialog (an approval) closes only through one of its answers.
  // A passive dialog (an approval) never takes the keyboard: no backdrop catches clicks, nothing is focused, and
  // its buttons do not take focus when clicked, so the person's typing goes on in the editor.
  const dialog = h(`div.modal-backdrop${passive ? '.passive' : ''}#${id}`, { onclick: (event) => { if (dismissable && event.target === dialog) close(); } },
    h(`div.modal${wide ? '.wide' : ''}`, { role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': `${id}-title` },
      h('header.modal-head', {},
        h(`h2#${id}-title`, { i18n: titleKey }),
        dismissable ? h('button.icon-button.modal-close', { type: 'button', i18nTitle: 'close', onclick: close }, '×') : null),
      h('div.modal-body', {}, body),
      actions.length ? h('footer.modal-foot', {}, actions) : null));
  dialog.addEventListener('keydown', (event) => { if (dismissable && event.key === 'Escape') close(); });
  layer().append(dialog);
  if (passive) {
    dialog.addEventListener('mousedown', (event) => { if (event.target.closest('button')) event.preventDefault(); });
  } else {
    (dialog.querySelector('[autofocus]') || dialog.querySelector('.modal-foot button, .modal-close')).focus();
  }
  return { el: dialog, close };
}

/** A short message in the corner; `action` {label, run} adds a button (e.g. a clipboard write needing a click). */
export function toast(message, kind = 'info', ms = 3500, action = null) {
  const el = h(`div.toast.${kind}`, { role: kind === 'error' ? 'alert' : 'status' }, h('span', {}, message),
    action ? h('button.toast-action', { type: 'button', onclick: () => { action.run(); el.remove(); } }, action.label) : null);
  document.getElementById('toasts').append(el);
  setTimeout(() => el.classList.add('leaving'), ms - 300);
  setTimeout(() => el.remove(), ms);
}

const ICONS = {
  // 24×24 outline icons drawn for deskbridge (no emoji: not every system has a colour emoji font).
  link: 'M10 14a4 4 0 0 0 5.66 0l3-3a4 4 0 0 0-5.66-5.66l-1 1M14 10a4 4 0 0 0-5.66 0l-3 3a4 4 0 0 0 5.66 5.66l1-1',
  file: 'M6 3h8l4 4v14H6zM14 3v4h4M9 12h6M9 16h6',
};

/** An inline SVG icon that takes the text colour. */
export function icon(name) {
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('class', `icon icon-${name}`);
  svg.setAttribute('aria-hidden', 'true');
  const path = document.createElementNS('http://www.w3.org/2000/svg', 'path');
  path.setAttribute('d', ICONS[name]);
  svg.append(path);
  return svg;
}
