// The first-run offer to connect an AI client (issue 11), from the platform's one copy of it
// (src/deskbridge/web/static/connect.js, served at /platform-static/connect.js; not bundled here). A quiet banner,
// never a dialog that takes the keyboard while the person writes: its button opens the offer.

import { h, modal } from './dom.js';
import { t } from './i18n.js';

const $ = (sel) => document.querySelector(sel);
const CONNECT_URL = '/platform-static/connect.js';
const TEXTS = ['intro', 'skill', 'go', 'notNow', 'pickOne', 'added', 'already'];

export async function offerConnect() {
  let offer = null;
  try {
    const url = CONNECT_URL; // a variable: esbuild leaves the import to the browser
    const { onboardingOffer } = await import(url);
    offer = await onboardingOffer({
      text: Object.fromEntries(TEXTS.map((key) => [key, t(`onboarding.${key}`)])),
      onDone: (how) => {
        $('#onboarding-banner')?.remove();
        if (how === 'dismissed') $('#panel-onboarding')?.remove();
      },
    });
  } catch { offer = null; } // an older server without the platform's script: no offer
  document.body.dataset.onboarding = offer ? 'offered' : 'none'; // for tests and for the page's own checks
  if (!offer) return;
  const banner = h('div#onboarding-banner.banner.info', { role: 'status' },
    h('span', { i18n: 'onboarding.banner' }),
    h('button#onboarding-open', { type: 'button', i18n: 'onboarding.open', onclick: () => modal('panel-onboarding', 'onboarding.title', offer) }),
    h('button.icon-button', { type: 'button', i18nTitle: 'close', onclick: () => banner.remove() }, '×'));
  document.querySelector('.banners')?.append(banner);
}
