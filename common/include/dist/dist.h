// dist/dist.h — everything a chapter needs, in one include.
#pragma once

#include "dist/check.h"
#include "dist/cli.h"
#include "dist/device.h"
#include "dist/env.h"
#include "dist/files.h"
#include "dist/init.h"
#include "dist/log.h"
#include "dist/process_group.h"
#include "dist/run_main.h"
#include "dist/sampler.h"
#include "dist/seed.h"
#include "dist/store.h"
#include "dist/tensor.h"
#include "dist/zero_first.h"
