import { z } from 'zod';
import type { Profile } from '../upstream/model.js';
import { amountSchema, type FixtureMember, httpUrlSchema, ipAddressSchema } from './fixture.js';
import { normalizeIp } from './ip-address.js';

/** A member as the simulator holds it: the fixture record, mutable, plus a lookup set. */
export interface MemberState extends FixtureMember {
  /** {@link FixtureMember.ip_whitelist} as a set, kept in step by {@link MemberDirectory.patch}. */
  whitelist: Set<string>;
}

/** Body of `PATCH /__sim/members/:member_id`: any of these fields; an unknown key is an error. */
export const memberPatchSchema = z
  .strictObject({
    balance: amountSchema,
    ip_whitelist: z.array(ipAddressSchema),
    h2h_enabled: z.boolean(),
    active: z.boolean(),
    webhook_url: httpUrlSchema.nullable(),
  })
  .partial();
export type MemberPatch = z.output<typeof memberPatchSchema>;

/** The members of the current run, indexed by id and by API key. */
export class MemberDirectory {
  private readonly byId = new Map<string, MemberState>();
  private readonly byApiKey = new Map<string, MemberState>();

  constructor(members: readonly FixtureMember[]) {
    for (const member of members) {
      const state: MemberState = {
        ...member,
        ip_whitelist: [...member.ip_whitelist],
        whitelist: new Set(member.ip_whitelist),
      };
      this.byId.set(state.member_id, state);
      this.byApiKey.set(state.api_key, state);
    }
  }

  findByApiKey(apiKey: string): MemberState | undefined {
    return this.byApiKey.get(apiKey);
  }

  findById(memberId: string): MemberState | undefined {
    return this.byId.get(memberId);
  }

  all(): MemberState[] {
    return [...this.byId.values()];
  }

  /** Applies a validated patch in place. */
  patch(member: MemberState, patch: MemberPatch): void {
    if (patch.balance !== undefined) member.balance = patch.balance;
    if (patch.h2h_enabled !== undefined) member.h2h_enabled = patch.h2h_enabled;
    if (patch.active !== undefined) member.active = patch.active;
    if (patch.webhook_url !== undefined) member.webhook_url = patch.webhook_url;
    if (patch.ip_whitelist !== undefined) {
      member.ip_whitelist = patch.ip_whitelist.map(normalizeIp);
      member.whitelist = new Set(member.ip_whitelist);
    }
  }
}

/** GET /profile. */
export function toProfile(member: MemberState): Profile {
  return {
    member_id: member.member_id,
    member_name: member.member_name,
    member_role: member.member_role,
    member_balance: member.balance,
  };
}

/** A member as the control API shows it: the fixture's fields with the current values. */
export function toControlMember(member: MemberState): FixtureMember {
  const { whitelist: _whitelist, ...record } = member;
  return { ...record, ip_whitelist: [...record.ip_whitelist] };
}
