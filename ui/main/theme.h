// SPDX-License-Identifier: GPL-3.0-or-later
// The Studio's light and dark palettes (Fusion style), and which one the desktop asks for. Qt 6.4 has no
// colour-scheme hint, so "system" reads the desktop's setting (GNOME's color-scheme, GTK_THEME) itself.
#pragma once

#include <QIcon>
#include <QString>

namespace spur::studio {

enum class Theme { system, light, dark };

Theme theme_from_name(const QString& name);
QString theme_name(Theme theme);
/// Whether the desktop prefers dark: GTK_THEME ending in ":dark", GNOME's color-scheme 'prefer-dark', or a
/// platform palette whose windows are dark.
bool desktop_prefers_dark();
/// Applies the palette to the whole application (system: light or dark as the desktop prefers).
void apply_theme(Theme theme);
/// The theme saved in the settings in use (QSettings(), key view/theme). Default: system.
Theme saved_theme();
/// Saves the theme in the settings in use and applies it (the View menu's choice).
void choose_theme(Theme theme);
/// Makes `application_name` the settings' scope (QSettings() reads its file from now on) and applies the theme
/// saved there. A scope chosen after start-up, as the demo's (kept apart from the user's), brings its own theme:
/// read before it was chosen, the dark theme ticked in the demo's View menu was not applied after a restart.
void use_settings_of(const QString& application_name);

/// The run actions' icons, drawn in colours that read on the light and the dark palette alike (Fusion's
/// media icons are near-black: on the dark palette Launch and Stop were almost invisible). 16 to 48 px.
enum class RunIcon { launch, stop, relaunch };
QIcon run_icon(RunIcon kind);

}  // namespace spur::studio
