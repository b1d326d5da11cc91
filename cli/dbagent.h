/* dbagent.h - the node's knowledge base as the agent serves it to users (command layer; the
 * service, node/agent.c, includes nothing of db/ and calls this through agent_opts.db_query). */
#ifndef CRASHPACK_DBAGENT_H
#define CRASHPACK_DBAGENT_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* agent.h's agent_db_fn (cmd_db.c): a {"op":"db","query":"list"|"show"|"search", ...} request
 * answered from the knowledge base at where with uid's crashes only, as the document `db list|
 * show|search --json` prints; NULL with err (*notfound: no such crash of uid's, or no knowledge
 * base). */
cJSON *db_agent_answer(const char *where, const cJSON *req, unsigned uid, int *notfound, char *err,
                       size_t errlen);
#endif
