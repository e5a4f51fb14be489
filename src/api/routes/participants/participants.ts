import { z } from 'zod';
import { getLiveLesson } from '../../../domain/lessons.js';
import { PERSON_REF } from '../../../domain/people.js';
import { removeParticipant } from '../../../domain/removals.js';
import { defineRoute } from '../../route.js';

/** A person of a lesson, by the partner's reference; anything else names nobody (404). */
const PersonParams = z.object({ id: z.string().min(1).max(64), person: z.string().regex(PERSON_REF) }).describe('Participant');

export const participantRoutes = [
  defineRoute({
    method: 'post',
    path: '/lessons/{id}/participants/{person}/remove',
    operationId: 'removeParticipant',
    tag: 'Links',
    summary: "Remove a person from the lesson, as the teacher's Remove does",
    description:
      'Every link of the person to this lesson issued until now stops opening, and their connections close on every node within 2 s (their page says they were removed). ' +
      'A link issued to them later lets them back in. 404 not_found when no link of the lesson was issued to the person.',
    params: PersonParams,
    responses: { 204: { description: 'Removed' } },
    errors: ['not_found', 'archived'],
    async handler(ctx, { params }) {
      const { deps, auth } = ctx.state;
      const lesson = await getLiveLesson(ctx.state.lessons, auth.partner.id, params.id);
      await removeParticipant(deps.sql, lesson.id, params.person, deps.clock.now());
      ctx.status = 204;
    },
  }),
];
