import type { CatalogSnapshot } from '../../src/store/catalog.js';

/**
 * A catalog of one product, ML86 in category ML, at `price`, with the profile balance `balance`,
 * as a sync would have read it from the upstream at `readAt` (its profile at `profileReadAt`,
 * default the same instant).
 */
export function catalogSnapshot({
  price = 15_000,
  balance,
  readAt = Date.now(),
  profileReadAt = readAt,
}: {
  price?: number;
  balance: number;
  readAt?: number;
  profileReadAt?: number;
}): CatalogSnapshot {
  return {
    readAt,
    categories: [{ code: 'ML', name: 'Mobile Legends', sub_name: 'Moonton', logo: '', is_active: true }],
    products: [
      {
        id: '11111111-1111-4111-8111-111111111111',
        code: 'ML86',
        name: 'ML 86',
        category_code: 'ML',
        price,
        is_active: true,
      },
    ],
    profile: { balance, readAt: profileReadAt },
  };
}
