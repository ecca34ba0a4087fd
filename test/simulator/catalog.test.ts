import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Product } from '../../src/upstream/model.js';
import {
  DEMO_MEMBERS,
  demoFixture,
  type FixtureCategory,
  type FixtureProduct,
  fixtureProduct,
  startSimulator,
} from '../helpers/simulator.js';

const PRODUCT_FIELDS = ['category_code', 'code', 'id', 'is_active', 'name', 'price'];
/** The simulator's extension to GET /products: the product's target rules (docs/simulator.md). */
const EXTENSION_FIELDS = ['target'];

/**
 * What GET /products should show of a fixture product to a member of `role`: `is_active` only
 * when it can be ordered through the API (active, API-enabled, in an active category).
 */
function expectedProduct(product: FixtureProduct, role: string, categories: FixtureCategory[]): Product {
  const categoryActive = categories.find((c) => c.code === product.category_code)?.is_active === true;
  return {
    id: product.id,
    code: product.code,
    name: product.name,
    category_code: product.category_code,
    price: product.role_prices[role] ?? product.price,
    is_active: product.is_active && product.api_enabled && categoryActive,
    ...(Object.keys(product.target).length > 0 ? { target: product.target } : {}),
  };
}

/** Products a member can order through the API: listed whatever else the simulator shows. */
function orderable(products: FixtureProduct[]): FixtureProduct[] {
  return products.filter((p) => p.is_active && p.api_enabled);
}

function byCode(products: Product[]): Map<string, Product> {
  return new Map(products.map((p) => [p.code, p]));
}

describe('GET /categories', () => {
  test('lists every fixture category with name, code, sub_name, logo and is_active', async (t) => {
    const { api, fixture } = await startSimulator(t);

    const answer = await api('/categories');

    assert.equal(answer.status, 200);
    assert.ok(Array.isArray(answer.body), 'a plain array');
    assert.deepEqual(
      [...answer.body].sort((a, b) => a.code.localeCompare(b.code)),
      [...fixture.categories].sort((a, b) => a.code.localeCompare(b.code)),
    );
  });
});

describe('GET /products', () => {
  test('answers a plain array of {id, code, name, category_code, price, is_active}, plus the target extension', async (t) => {
    const { api } = await startSimulator(t);

    const answer = await api<Product[]>('/products');

    assert.equal(answer.status, 200);
    assert.ok(Array.isArray(answer.body), `a plain array, got ${answer.text.slice(0, 80)}`);
    assert.ok(answer.body.length > 0);
    for (const product of answer.body) {
      assert.deepEqual(
        Object.keys(product)
          .filter((key) => !EXTENSION_FIELDS.includes(key))
          .sort(),
        PRODUCT_FIELDS,
        product.code,
      );
      assert.match(product.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    }
  });

  test('a reseller sees every orderable product at its reseller price', async (t) => {
    const { api, fixture } = await startSimulator(t);

    const listed = byCode((await api<Product[]>('/products')).body);

    for (const product of orderable(fixture.products)) {
      assert.deepEqual(
        listed.get(product.code),
        expectedProduct(product, 'reseller', fixture.categories),
        product.code,
      );
      assert.notEqual(listed.get(product.code)?.price, product.price, `${product.code} discounted`);
    }
  });

  test('a member of role "member" sees the base price', async (t) => {
    const { api, fixture, keyOf } = await startSimulator(t);

    const listed = byCode((await api<Product[]>('/products', { key: keyOf(DEMO_MEMBERS.memberRole) })).body);

    for (const product of orderable(fixture.products)) {
      assert.deepEqual(
        listed.get(product.code),
        expectedProduct(product, 'member', fixture.categories),
        product.code,
      );
      assert.equal(listed.get(product.code)?.price, product.price, product.code);
    }
  });

  test('every product listed matches its fixture record, price adjusted to the caller', async (t) => {
    const { api, fixture } = await startSimulator(t);

    const listed = (await api<Product[]>('/products')).body;

    for (const product of listed) {
      const record = fixture.products.find((p) => p.code === product.code);
      assert.ok(record, `${product.code} is in the fixture`);
      assert.deepEqual(product, expectedProduct(record, 'reseller', fixture.categories));
    }
  });

  test('is_active is true only for a product orderable through the API: an inactive, an API-disabled one and one of an inactive category list as false', async (t) => {
    const fixture = demoFixture();
    fixtureProduct(fixture, 'VAL-475').is_active = true; // active itself, in the inactive VAL
    const { api } = await startSimulator(t, { fixture });

    const listed = byCode((await api<Product[]>('/products')).body);

    assert.deepEqual(
      ['MLBB-86', 'MLBB-2195', 'PUBGM-325', 'VAL-475'].map((code) => [code, listed.get(code)?.is_active]),
      [
        ['MLBB-86', true],
        ['MLBB-2195', false],
        ['PUBGM-325', false],
        ['VAL-475', false],
      ],
    );
  });

  test('category_code restricts the list to that category', async (t) => {
    const { api, fixture } = await startSimulator(t);

    const answer = await api<Product[]>('/products?category_code=GI');

    assert.equal(answer.status, 200);
    assert.deepEqual(
      answer.body.map((p) => p.code).sort(),
      orderable(fixture.products)
        .filter((p) => p.category_code === 'GI')
        .map((p) => p.code)
        .sort(),
    );
    assert.ok(answer.body.every((p) => p.category_code === 'GI'));
  });

  test('an unknown category_code gives an empty list', async (t) => {
    const { api } = await startSimulator(t);

    const answer = await api<Product[]>('/products?category_code=NOPE');

    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body, []);
  });
});

describe('GET /products target extension', () => {
  test("publishes each product's target rules from the fixture, and none for a product without rules", async (t) => {
    const fixture = demoFixture();
    fixtureProduct(fixture, 'FF-70').target = {};
    const { api } = await startSimulator(t, { fixture });

    const listed = byCode((await api<Product[]>('/products')).body);

    assert.deepEqual(listed.get('MLBB-86')?.target, { user_id: '^[0-9]{6,12}$', server_id: '^[0-9]{4,5}$' });
    assert.deepEqual(listed.get('GI-60')?.target, fixtureProduct(fixture, 'GI-60').target);
    assert.equal(Object.hasOwn(listed.get('FF-70')!, 'target'), false);
  });
});
